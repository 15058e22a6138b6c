// Collective algorithms over raw buffers: what bytes go to which rank, in which order.
//
// This layer knows nothing of tensors or c10d: it moves and reduces contiguous memory through a
// transport::Mesh and the reduction kernels. The runtime (ops/collectives.cpp) stages tensors into
// such buffers. Which algorithm runs for which size is decided here, from occl::Tuning.
#pragma once

#include "../kernels/reduce.hpp"
#include "../transport/mesh.hpp"

#include <cstddef>
#include <vector>

namespace occl::algorithms {

using transport::Deadline;
using transport::Mesh;

struct Reduction {
  kernels::DType dtype;
  kernels::ReduceOp op;
};

// The reductions below, for rounds_once.
enum class Reducing { AllReduce, ReduceScatter, Reduce };

// Whether `what` of `count` elements per rank (per block for ReduceScatter) meets every rank's
// input in one kernel call on this mesh: the direct and single-copy algorithms and a ring of two
// ranks do; a longer ring passes partial sums from rank to rank. When it does, float16 and
// bfloat16 may travel as they are and still round once: the kernel adds in float32
// (kernels/reduce.hpp). Every rank of a group answers alike for the same op.
bool rounds_once(const Mesh& mesh, Reducing what, size_t count, Reduction reduction);

// In place on `count` elements: every rank ends with the reduction over all ranks.
void allreduce(Mesh& mesh, void* data, size_t count, Reduction reduction, Deadline deadline);

// Where a reduce-scatter reads and writes: `input` (mesh.size() blocks, only read), `partial`
// (as large as the input; partial sums of other ranks' blocks, unused with two ranks: pass
// nullptr) and `output` (this rank's reduced block). They may overlap as an in-place
// reduce-scatter does: input == partial, output == block r of it.
struct ReduceBuffers {
  const char* input;
  char* partial;
  char* output;
};

// Rank r ends with block r of `block_count` elements, reduced over all ranks, in buffers.output.
void reduce_scatter(Mesh& mesh, const ReduceBuffers& buffers, size_t block_count,
                    Reduction reduction, Deadline deadline);

// reduce_scatter with this rank's input in a block per rank, anywhere (blocks[j] for rank j,
// each only read).
void reduce_scatter_list(Mesh& mesh, const std::vector<const char*>& blocks, char* output,
                         size_t block_count, Reduction reduction, Deadline deadline);

// `data` holds mesh.size() blocks of `block_bytes`; block r must hold this rank's contribution.
// Every rank ends with every block.
void allgather(Mesh& mesh, void* data, size_t block_bytes, Deadline deadline);

// Every rank's `input` (`bytes`) into outputs[r] of every rank, r the sender (outputs: one
// buffer per rank, none overlapping `input`).
void allgather_into(Mesh& mesh, const void* input, const std::vector<void*>& outputs,
                    size_t bytes, Deadline deadline);

// Copies `bytes` from `root`'s data into every other rank's data.
void broadcast(Mesh& mesh, void* data, size_t bytes, int root, Deadline deadline);

// Returns once every rank has entered.
void barrier(Mesh& mesh, Deadline deadline);

// `data` (count elements) is reduced over all ranks into the root's data; other ranks' data is
// only read.
void reduce(Mesh& mesh, void* data, size_t count, Reduction reduction, int root,
            Deadline deadline);

// The root receives `bytes` from every rank r into blocks[r] (blocks[root] is the root's own:
// not touched). Other ranks send `data`; `blocks` is only read on the root.
void gather(Mesh& mesh, const void* data, const std::vector<void*>& blocks, size_t bytes,
            int root, Deadline deadline);

// Every rank r receives the root's blocks[r] into `data` (the root copies its own block).
void scatter(Mesh& mesh, const std::vector<const void*>& blocks, void* data, size_t bytes,
             int root, Deadline deadline);

// Rank r sends sends[j] to rank j and receives rank j's bytes for it into receives[j], for
// every rank j (entry j names peer j); its own bytes are copied. The bytes may lie anywhere:
// one buffer cut into slices (all_to_all_single) or a tensor per peer (all_to_all).
void alltoall(Mesh& mesh, const std::vector<transport::SendOp>& sends,
              const std::vector<transport::RecvOp>& receives, Deadline deadline);

}  // namespace occl::algorithms
