#include "occl_kit/signature.hpp"

#include "occl_kit/check_helpers.hpp"
#include "occl_kit/errors.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace occl::kit {
namespace {

void copy_terminated(char* dst, size_t capacity, const std::string& text) {
  std::memset(dst, 0, capacity);
  std::memcpy(dst, text.data(), std::min(capacity - 1, text.size()));
}

// A peer's signature is untrusted bytes: read its strings only up to their buffers' ends.
std::string read_terminated(const char* src, size_t capacity) {
  return std::string(src, strnlen(src, capacity));
}

uint64_t digest(const std::vector<int64_t>& first, const std::vector<int64_t>& second) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a over the numbers' bytes, a separator between
  for (const auto* numbers : {&first, &second}) {
    for (int64_t number : *numbers) {
      for (size_t byte = 0; byte < sizeof(number); ++byte) {
        hash = (hash ^ ((static_cast<uint64_t>(number) >> (8 * byte)) & 0xff)) * 1099511628211ull;
      }
    }
    hash = (hash ^ 0xff) * 1099511628211ull;
  }
  return hash;
}

SignatureRecord record_of(const Signature& collective) {
  SignatureRecord s{};
  copy_terminated(s.op, sizeof(s.op), collective.op);
  copy_terminated(s.dtype, sizeof(s.dtype), collective.dtype);
  copy_terminated(s.reduction, sizeof(s.reduction), collective.reduction);
  s.count = collective.count;
  s.root = collective.root;
  s.tensors = collective.tensor_numels.empty()
                  ? 1
                  : static_cast<int64_t>(collective.tensor_numels.size());
  s.sizes_digest = digest(collective.tensor_numels, collective.shape);
  s.has_pairs = collective.bytes_to.empty() ? 0 : 1;
  s.sequence = collective.sequence;
  return s;
}

std::string describe(const SignatureRecord& s) {
  std::ostringstream out;
  out << read_terminated(s.op, sizeof(s.op)) << "(" << read_terminated(s.dtype, sizeof(s.dtype));
  if (s.tensors != 1) out << ", " << s.tensors << " tensors";
  if (s.count >= 0) out << ", " << s.count << " elements";
  if (s.root >= 0) out << ", root " << s.root;
  std::string reduction = read_terminated(s.reduction, sizeof(s.reduction));
  if (!reduction.empty()) out << ", " << reduction;
  out << ")";
  return out.str();
}

std::string list(const std::vector<int64_t>& numbers) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < numbers.size(); ++i) out << (i ? ", " : "") << numbers[i];
  out << "]";
  return out.str();
}

std::string mismatch_prefix(const SignatureRecord& mine) {
  return "mismatched collectives at sequence " + std::to_string(mine.sequence) + ": ";
}

// Why `theirs` (from `peer`) differs from `mine`, naming both sides.
std::string mismatch(int rank, const Signature& collective, const SignatureRecord& mine, int peer,
                     const SignatureRecord& theirs) {
  std::string me = "rank " + std::to_string(rank), them = "rank " + std::to_string(peer);
  if (describe(mine) == describe(theirs) && mine.sequence == theirs.sequence) {
    const bool sparse = !collective.shape.empty();
    return mismatch_prefix(mine) + me + " and " + them + " both called " + describe(mine) +
           ", with tensors of other " + (sparse ? "shapes" : "sizes") + " (" + me + "'s: " +
           list(sparse ? collective.shape : collective.tensor_numels) + ")";
  }
  std::string text = mismatch_prefix(mine) + me + " called " + describe(mine) + ", " + them +
                     " called " + describe(theirs);
  if (theirs.sequence != mine.sequence) {
    text += " as its collective #" + std::to_string(theirs.sequence);
  }
  return text;
}

}  // namespace

Agreement::Agreement(const Signature& mine, int rank, int size, ExchangeFn exchange)
    : mine_(mine),
      rank_(rank),
      size_(size),
      exchange_(std::move(exchange)),
      record_(record_of(mine)),
      theirs_(static_cast<size_t>(size), record_) {}

void Agreement::settle() {
  exchange_(&record_, theirs_.data(), sizeof(SignatureRecord));
  compare();
}

void Agreement::check_carried() { compare(); }

void Agreement::compare() {
  joined_ = true;
  for (int peer = 0; peer < size_; ++peer) {
    if (theirs_[peer] == record_) continue;
    throw MismatchError(mismatch(rank_, mine_, record_, peer, theirs_[peer]));
  }
  if (record_.has_pairs) agree_on_pairs();
  settled_ = true;
}

void Agreement::agree_on_pairs() {
  // Every rank learns every rank's byte counts (row r: what rank r sends each rank, then what
  // it expects from each), so all of them find the same first pair that disagrees, if any.
  const size_t n = static_cast<size_t>(size_);
  const size_t row = 2 * n;
  std::vector<int64_t> rows(row * n);
  std::copy(mine_.bytes_to.begin(), mine_.bytes_to.end(), rows.begin() + row * rank_);
  std::copy(mine_.bytes_from.begin(), mine_.bytes_from.end(), rows.begin() + row * rank_ + n);
  exchange_(&rows[row * rank_], rows.data(), row * sizeof(int64_t));
  for (size_t sender = 0; sender < n; ++sender) {
    for (size_t receiver = 0; receiver < n; ++receiver) {
      int64_t sent = rows[row * sender + receiver];
      int64_t expected = rows[row * receiver + n + sender];
      if (sent == expected) continue;
      throw MismatchError(mismatch_prefix(record_) + describe(record_) + ": rank " +
                          std::to_string(sender) + " sends rank " + std::to_string(receiver) +
                          " " + std::to_string(sent) + " bytes, rank " +
                          std::to_string(receiver) + " expects " + std::to_string(expected));
    }
  }
}

void agree(const Signature& mine, int rank, int size, const ExchangeFn& exchange) {
  Agreement(mine, rank, size, exchange).settle();
}

std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kShort: return "int16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kBool: return "bool";
    default: return c10::toString(type);
  }
}

std::string dtype_label(const at::Tensor& tensor) {
  std::string name = dtype_name(tensor.scalar_type());
  return tensor.is_sparse() ? name + " sparse" : name;
}

std::string reduction_label(const c10d::ReduceOp& op) {
  std::string name = reduce_op_name(op);
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return name;
  auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  if (supplement == nullptr) return name + "(no factor)";
  return name + (supplement->tensor_factor.defined() ? "(tensor factor)" : "(scalar factor)");
}

std::vector<int64_t> numels_of(const std::vector<at::Tensor>& tensors) {
  std::vector<int64_t> numels;
  for (const auto& t : tensors) numels.push_back(t.numel());
  return numels;
}

int64_t total_numel(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  return total;
}

std::vector<int64_t> sparse_shape(const at::Tensor& tensor) {
  return tensor.is_sparse() ? tensor.sizes().vec() : std::vector<int64_t>{};
}

std::vector<int64_t> bytes_per_tensor(const std::vector<at::Tensor>& tensors) {
  std::vector<int64_t> bytes;
  for (const auto& t : tensors) bytes.push_back(static_cast<int64_t>(t.nbytes()));
  return bytes;
}

std::vector<int64_t> bytes_per_slice(const std::vector<int64_t>& split_sizes,
                                     const at::Tensor& tensor, int world_size) {
  std::vector<int64_t> bytes;
  const size_t row = row_bytes_of(tensor);
  for (int64_t rows : rows_per_rank(split_sizes, tensor, world_size)) {
    bytes.push_back(rows * static_cast<int64_t>(row));
  }
  return bytes;
}

}  // namespace occl::kit
