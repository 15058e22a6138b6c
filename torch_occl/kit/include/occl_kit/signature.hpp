// What every rank of a group checks before a collective: that all of them call the same one, alike.
//
// The spec declares, per op, what must agree across ranks (its `agree:` key); the generated backend
// fills a Signature from the op's arguments and the engine compares every rank's before the op
// runs, so ranks calling different collectives, or the same one differently, all fail with an
// error naming both sides instead of hanging or silently computing different results.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace occl::kit {

struct Signature {
  std::string op;         // "allreduce"; set by the engine
  std::string dtype;      // "float32" (dtype_label); empty for ops without data
  int64_t count = -1;     // elements that must be equal on every rank, -1 when they may differ
  int64_t root = -1;      // -1 for ops without a root
  std::string reduction;  // "SUM", "PREMUL_SUM(tensor factor)" (reduction_label)
  // Element counts of the op's tensors, in order, for ops over several (the coalesced ones).
  std::vector<int64_t> tensor_numels;
  // The shape, where the result depends on it beyond the count (sparse tensors).
  std::vector<int64_t> shape;
  // For ops whose ranks exchange different amounts (all_to_all): bytes this rank sends each rank
  // and expects from each rank (one entry per rank of the group); empty otherwise. Every rank
  // checks every pair, so all raise when any two disagree.
  std::vector<int64_t> bytes_to;
  std::vector<int64_t> bytes_from;
  uint64_t sequence = 0;  // the collective's index in its group; set by the engine
};

// Sends `bytes` from `mine` to every other rank and receives rank r's into
// `everyone + r * bytes` (the runtime's links; this rank's slot is left as it is). A timeout
// should name the ranks that did not arrive.
using ExchangeFn = std::function<void(const void* mine, void* everyone, size_t bytes)>;

// A Signature as it travels: fixed size, every string NUL-terminated, the tensor sizes as a
// digest. Two ranks call the same collective alike when their records are equal byte for byte.
// The pairs' byte counts follow in a second round, when the ranks agree that they come.
struct SignatureRecord {
  char op[32];
  char dtype[16];
  char reduction[32];
  int64_t count;
  int64_t root;
  int64_t tensors;
  uint64_t sizes_digest;  // of the tensors' element counts and the shape
  int64_t has_pairs;      // 1 when per-pair byte counts follow
  uint64_t sequence;

  bool operator==(const SignatureRecord&) const = default;
};
static_assert(sizeof(SignatureRecord) == 128, "the signature is part of the wire protocol");

// One collective's agreement check: this rank's record against every other rank's, then, for
// ops with per-pair byte counts, every rank's counts. A difference throws MismatchError naming
// both sides; whatever `exchange` throws passes through.
//
// The engine settles it before the op runs, unless the runtime carries the records in the op's
// own messages (Runtime::carries_signatures): then the op gets it (OpContext::agreement) and,
// before it uses anything a peer sent, either
//   - settles it: a round of its own through `exchange`, or
//   - sends record() ahead of its first message to every peer (a message of its own to a peer
//     it has nothing for), receives each peer's into slot(peer), and calls check_carried().
//     A peer whose record differs from record() byte for byte runs another collective: what
//     came with its record is not this op's and must not be used (read it, and drop it).
class Agreement {
 public:
  Agreement(const Signature& mine, int rank, int size, ExchangeFn exchange);
  const SignatureRecord& record() const { return record_; }
  void* slot(int peer) { return &theirs_[peer]; }
  void settle();
  void check_carried();
  bool settled() const { return settled_; }
  // Every rank's record is in (whether or not they agreed): every rank has entered a collective.
  bool joined() const { return joined_; }

 private:
  void compare();
  void agree_on_pairs();

  const Signature& mine_;
  int rank_;
  int size_;
  ExchangeFn exchange_;
  SignatureRecord record_;
  std::vector<SignatureRecord> theirs_;
  bool joined_ = false;
  bool settled_ = false;
};

// Compares `mine` with every other rank's, through `exchange`: Agreement(...).settle().
void agree(const Signature& mine, int rank, int size, const ExchangeFn& exchange);

// ---- What the spec's `agree:` expressions call -------------------------------------------------
// torch's name of the dtype ("float32", "bfloat16").
std::string dtype_name(at::ScalarType type);
// "float32"; "float32 sparse" for a sparse tensor, which travels unlike a dense one.
std::string dtype_label(const at::Tensor& tensor);
// The reduce op's name; for PREMUL_SUM also whether its factor is a tensor or a number (the factor
// itself may differ from rank to rank: each scales its own input).
std::string reduction_label(const c10d::ReduceOp& op);
std::vector<int64_t> numels_of(const std::vector<at::Tensor>& tensors);
int64_t total_numel(const std::vector<at::Tensor>& tensors);
// A sparse tensor's entries land by their indices, so its shape must agree; empty when dense.
std::vector<int64_t> sparse_shape(const at::Tensor& tensor);
// The bytes of each tensor, in order (alltoall: what this rank sends or receives per rank).
std::vector<int64_t> bytes_per_tensor(const std::vector<at::Tensor>& tensors);
// The bytes of each rank's slice of `tensor` under `split_sizes` (see slice_bytes).
std::vector<int64_t> bytes_per_slice(const std::vector<int64_t>& split_sizes,
                                     const at::Tensor& tensor, int world_size);

}  // namespace occl::kit
