#include "occl_kit/signature.hpp"

#include "occl_kit/check_helpers.hpp"
#include "occl_kit/errors.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace occl::kit {
namespace {

// A Signature as it travels: fixed size, every string NUL-terminated, the tensor sizes as a
// digest. The pairs' byte counts follow in a second round, when the ranks agree that they come.
struct OpSignature {
  char op[32];
  char dtype[16];
  char reduction[32];
  int64_t count;
  int64_t root;
  int64_t tensors;
  uint64_t sizes_digest;  // of the tensors' element counts and the shape
  int64_t has_pairs;      // 1 when per-pair byte counts follow
  uint64_t sequence;

  bool operator==(const OpSignature&) const = default;
};
static_assert(sizeof(OpSignature) == 128, "the signature is part of the wire protocol");

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

OpSignature record_of(const Signature& collective) {
  OpSignature s{};
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

std::string describe(const OpSignature& s) {
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

std::string mismatch_prefix(const OpSignature& mine) {
  return "mismatched collectives at sequence " + std::to_string(mine.sequence) + ": ";
}

// Why `theirs` (from `peer`) differs from `mine`, naming both sides.
std::string mismatch(int rank, const Signature& collective, const OpSignature& mine, int peer,
                     const OpSignature& theirs) {
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

void agree(const Signature& mine, int rank, int size, const ExchangeFn& exchange) {
  const OpSignature signature = record_of(mine);
  std::vector<OpSignature> theirs(size, signature);
  exchange(&signature, theirs.data(), sizeof(OpSignature));
  for (int peer = 0; peer < size; ++peer) {
    if (theirs[peer] == signature) continue;
    throw MismatchError(mismatch(rank, mine, signature, peer, theirs[peer]));
  }
  if (!signature.has_pairs) return;

  // Every rank learns every rank's byte counts (row r: what rank r sends each rank, then what
  // it expects from each), so all of them find the same first pair that disagrees, if any.
  const size_t n = static_cast<size_t>(size);
  const size_t row = 2 * n;
  std::vector<int64_t> rows(row * n);
  std::copy(mine.bytes_to.begin(), mine.bytes_to.end(), rows.begin() + row * rank);
  std::copy(mine.bytes_from.begin(), mine.bytes_from.end(), rows.begin() + row * rank + n);
  exchange(&rows[row * rank], rows.data(), row * sizeof(int64_t));
  for (size_t sender = 0; sender < n; ++sender) {
    for (size_t receiver = 0; receiver < n; ++receiver) {
      int64_t sent = rows[row * sender + receiver];
      int64_t expected = rows[row * receiver + n + sender];
      if (sent == expected) continue;
      throw MismatchError(mismatch_prefix(signature) + describe(signature) + ": rank " +
                          std::to_string(sender) + " sends rank " + std::to_string(receiver) +
                          " " + std::to_string(sent) + " bytes, rank " +
                          std::to_string(receiver) + " expects " + std::to_string(expected));
    }
  }
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
