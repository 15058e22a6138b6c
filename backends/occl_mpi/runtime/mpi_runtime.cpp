// occl_mpi's runtime: the contract generated from spec/occl_mpi.yaml
// (generated/csrc/occl_mpi_contract.hpp) in MPI calls, on occl's backend kit, which queues the
// ops, checks that every rank calls them alike, names them in errors and completes their Works.
//
// Every op starts one nonblocking MPI call on its group's communicator and tests the request
// until it completes or the op's deadline passes, since MPI has no timeouts of its own:
// collectives on the kit's worker (or the thread that waits for them), point-to-point ops on the
// kit's completion engine. Those threads call MPI at once, so MPI runs at MPI_THREAD_MULTIPLE.
// MPI cancels receives only: the request of any other op that timed out stays in flight, with
// the tensors MPI may still touch, until MPI_Finalize, and the kit fails the group's later ops.
#include "occl_mpi_contract.hpp"

#include "occl_kit/library.hpp"
#include "occl_kit/reduce.hpp"
#include "occl_kit/rendezvous.hpp"
#include "occl_kit/request.hpp"
#include "occl_kit/signature.hpp"
#include "occl_kit/staging.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <c10/util/Exception.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace occl_mpi::runtime {
namespace {

namespace kit = ::occl::kit;
using LinkError = kit::LinkError;
using Tensors = std::vector<at::Tensor>;
using TensorLists = std::vector<std::vector<at::Tensor>>;

// How long MPI_Finalize may take at exit after an op abandoned a request: it waits for every
// process of the job, and a peer stuck in that op never comes. Past it the process leaves
// without finalizing, and mpirun ends the job.
constexpr auto kFinalizeBound = std::chrono::seconds(15);

// MPI as this process uses it: every call holds mpi().call(); MPI_Finalize runs at exit.
kit::Library& mpi() {
  static auto* library = new kit::Library("MPI");  // never destroyed: used at exit
  return *library;
}

void check(const char* call, int code) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw LinkError(LinkError::Kind::System, std::string(call) + ": " + std::string(text, length));
}

// Initialises MPI (finalized at exit) or adopts the MPI the process initialised itself (left to
// it to finalize); either way at MPI_THREAD_MULTIPLE.
void init_mpi() {
  auto initialising = mpi().initialising();
  int initialised = 0, finalized = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalized);
  TORCH_CHECK(!finalized, "occl_mpi: MPI was finalized, so this process can create no more groups");
  if (initialised) {
    MPI_Query_thread(&level);
  } else {
    check("MPI_Init_thread", MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &level));
    std::atexit([] { mpi().finalize(MPI_Finalize, kFinalizeBound); });
  }
  static const char* levels[] = {"SINGLE", "FUNNELED", "SERIALIZED"};
  TORCH_CHECK(level == MPI_THREAD_MULTIPLE, "occl_mpi: MPI runs at MPI_THREAD_", levels[level],
              ", occl_mpi needs MPI_THREAD_MULTIPLE (its worker and completion threads call MPI): ",
              initialised ? "initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...),"
                            " as mpi4py does by default"
                          : "this MPI does not provide it");
}

// The group's communicator: the group's global ranks of MPI_COMM_WORLD (all of it for the
// default group), or this process alone for a group of one.
MPI_Comm create_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                             const Config& config) {
  MPI_Comm comm = MPI_COMM_NULL;
  if (size == 1) {
    check("MPI_Comm_dup", MPI_Comm_dup(MPI_COMM_SELF, &comm));
    return comm;
  }
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const auto& global = config.global_ranks_in_group;
  const auto group = kit::describe_group(config.group_name, rank, size, global);
  std::vector<int> members(global.begin(), global.end());
  for (int r = 0; global.empty() && r < size; ++r) members.push_back(r);
  const bool same_world = global.empty() ? world_size == size : members.back() < world_size;
  TORCH_CHECK(same_world && members[rank] == world_rank, "occl_mpi: torch's global rank ",
              members[rank], " (", group, ") is rank ", world_rank, " of the ", world_size,
              " in MPI_COMM_WORLD: start every rank with mpirun, whose ranks torch must use"
              " (import occl_mpi sets RANK and WORLD_SIZE from mpirun's)");
  kit::wait_for_members(store, rank, size, config.timeout, "occl_mpi: cannot create " + group);
  auto in_mpi = mpi().call();
  MPI_Group world_group, members_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, size, members.data(), &members_group);
  check("MPI_Comm_create_group", MPI_Comm_create_group(MPI_COMM_WORLD, members_group, 0, &comm));
  MPI_Group_free(&members_group);
  MPI_Group_free(&world_group);
  return comm;
}

// Data moves as bytes (any dtype), reductions in elements: as MPI's int counts.
int as_count(int64_t count) {
  TORCH_CHECK(count <= std::numeric_limits<int>::max(), "occl_mpi: ", count,
              " elements or bytes in one call, more than MPI's int counts allow");
  return static_cast<int>(count);
}

int bytes(const at::Tensor& tensor) { return as_count(tensor.nbytes()); }

// MPI's type and op for a kit::Reduction (bool reduces as bytes, with BAND and BOR).
std::pair<MPI_Datatype, MPI_Op> mpi_reduction(const kit::Reduction& reduction) {
  static const std::map<at::ScalarType, MPI_Datatype> types = {{at::kFloat, MPI_FLOAT},
      {at::kDouble, MPI_DOUBLE}, {at::kChar, MPI_INT8_T}, {at::kByte, MPI_UINT8_T},
      {at::kBool, MPI_UINT8_T}, {at::kShort, MPI_INT16_T}, {at::kInt, MPI_INT32_T},
      {at::kLong, MPI_INT64_T}};
  using Op = c10d::ReduceOp;
  static const std::map<Op::RedOpType, MPI_Op> ops = {{Op::SUM, MPI_SUM}, {Op::PRODUCT, MPI_PROD},
      {Op::MIN, MPI_MIN}, {Op::MAX, MPI_MAX}, {Op::BAND, MPI_BAND}, {Op::BOR, MPI_BOR},
      {Op::BXOR, MPI_BXOR}};
  return {types.at(reduction.buffer.scalar_type()), ops.at(reduction.steps.base)};
}

// Starts a nonblocking call and returns its request, which keeps `tensors` (MPI can cancel
// receives only).
std::shared_ptr<kit::Request> start(const char* call, Tensors tensors, bool receive,
                                    const std::function<int(MPI_Request*)>& post) {
  auto handle = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  {
    auto in_mpi = mpi().call();
    check(call, post(handle.get()));
  }
  std::function<void()> cancel;
  if (receive) cancel = [handle] { auto in_mpi = mpi().call(); MPI_Cancel(handle.get()); };
  auto test = [handle, receive] {
    auto in_mpi = mpi().call();
    int done = 0;
    MPI_Status status;
    check("MPI_Test", MPI_Test(handle.get(), &done, &status));
    return kit::Poll{done != 0, done && receive ? status.MPI_SOURCE : -1};
  };
  return std::make_shared<kit::Request>(std::move(tensors), test, cancel);
}

// A collective's call, waited for until it completes (or the op's deadline or the group's abort
// ends the wait, and the request is abandoned).
void run(kit::OpContext& ctx, const char* call, Tensors tensors,
         const std::function<int(MPI_Request*)>& post) {
  auto request = start(call, std::move(tensors), /*receive=*/false, post);
  ctx.wait_until([&] { return request->test().done; },
                 std::string(call) + " did not complete: a rank did not call this op,"
                 " or is still in an earlier one");
}

// A point-to-point call, handed to the kit's completion engine, which completes the op (a
// received message written into the user's tensor).
void run_posted(kit::OpContext& ctx, const at::Tensor& tensor, const char* call, bool receive,
                const std::function<int(void*, int, MPI_Request*)>& post) {
  auto data = std::make_shared<kit::Staged>(tensor);
  auto request = start(call, {data->buffer()}, receive, [&](MPI_Request* handle) {
    return post(data->data(), bytes(data->buffer()), handle);
  });
  ctx.complete_when([request, data, receive] {
    const kit::Poll poll = request->test();
    if (poll.done && receive) data->commit();
    return poll;
  });
}

// Per-rank byte counts (row 0) and displacements (row 1) for MPI_Ialltoallv, in a tensor that
// stays with the request: MPI reads them until it completes.
at::Tensor byte_layout(const std::vector<int64_t>& per_rank) {
  auto counts = at::tensor(per_rank, at::kLong);
  auto layout = at::stack({counts, counts.cumsum(0) - counts});
  as_count(layout.max().item<int64_t>());
  return layout.to(at::kInt);
}

class MpiRuntime final : public Runtime {
 public:
  MpiRuntime(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  void exchange_signatures(kit::OpContext& ctx, const void* mine, void* everyone,
                           size_t bytes) override {
    // Copies that outlive a timed-out exchange, which MPI may still complete.
    const int count = as_count(bytes);
    auto record = at::from_blob(const_cast<void*>(mine), {count}, at::kByte).clone();
    auto all = at::empty({size_, count}, at::kByte);
    run(ctx, "MPI_Iallgather of every rank's signature of the op", {record, all}, [&](auto r) {
      return MPI_Iallgather(record.data_ptr(), count, MPI_BYTE, all.data_ptr(), count, MPI_BYTE,
                            comm_, r);
    });
    std::memcpy(everyone, all.data_ptr(), all.nbytes());
  }

  void broadcast(kit::OpContext& ctx, const Tensors& tensors,
                 const c10d::BroadcastOptions& opts) override {
    kit::Staged data(tensors[0]);
    run(ctx, "MPI_Ibcast", {data.buffer()}, [&](auto r) {
      return MPI_Ibcast(data.data(), bytes(data.buffer()), MPI_BYTE, opts.rootRank, comm_, r);
    });
    data.commit();
  }

  void allreduce(kit::OpContext& ctx, const Tensors& tensors,
                 const c10d::AllreduceOptions& opts) override {
    kit::Reduction reduction(opts.reduceOp, tensors[0]);
    const auto [type, op] = mpi_reduction(reduction);
    run(ctx, "MPI_Iallreduce", {reduction.buffer}, [&](auto r) {
      return MPI_Iallreduce(MPI_IN_PLACE, reduction.result.data_ptr(),
                            as_count(reduction.result.numel()), type, op, comm_, r);
    });
    reduction.finish(tensors[0], size_);
  }

  void reduce(kit::OpContext& ctx, const Tensors& tensors,
              const c10d::ReduceOptions& opts) override {
    const bool root = rank_ == opts.rootRank;
    kit::Reduction reduction(opts.reduceOp, tensors[0], root ? tensors[0].numel() : 0);
    const auto [type, op] = mpi_reduction(reduction);
    const auto& [buffer, result] = std::tie(reduction.buffer, reduction.result);
    run(ctx, "MPI_Ireduce", {buffer, result}, [&](auto r) {
      return MPI_Ireduce(buffer.data_ptr(), result.data_ptr(), as_count(buffer.numel()), type, op,
                         opts.rootRank, comm_, r);
    });
    if (root) reduction.finish(tensors[0], size_);
  }

  void allgather(kit::OpContext& ctx, const TensorLists& output_tensors,
                 const Tensors& input_tensors, const c10d::AllgatherOptions& opts) override {
    auto gathered = at::empty({size_ * input_tensors[0].numel()}, input_tensors[0].options());
    allgather_base(ctx, gathered, input_tensors[0], opts);
    kit::unpack(gathered, output_tensors[0]);
  }

  void allgather_base(kit::OpContext& ctx, const at::Tensor& output_tensor,
                      const at::Tensor& input_tensor, const c10d::AllgatherOptions&) override {
    kit::Staged output(output_tensor);
    auto input = input_tensor.contiguous();
    run(ctx, "MPI_Iallgather", {input, output.buffer()}, [&](auto r) {
      return MPI_Iallgather(input.data_ptr(), bytes(input), MPI_BYTE, output.data(), bytes(input),
                            MPI_BYTE, comm_, r);
    });
    output.commit();
  }

  void gather(kit::OpContext& ctx, const TensorLists& output_tensors,
              const Tensors& input_tensors, const c10d::GatherOptions& opts) override {
    const bool root = rank_ == opts.rootRank;
    auto input = input_tensors[0].contiguous();
    auto gathered = at::empty({root ? size_ * input.numel() : 0}, input.options());
    run(ctx, "MPI_Igather", {input, gathered}, [&](auto r) {
      return MPI_Igather(input.data_ptr(), bytes(input), MPI_BYTE, gathered.data_ptr(),
                         bytes(input), MPI_BYTE, opts.rootRank, comm_, r);
    });
    if (root) kit::unpack(gathered, output_tensors[0]);
  }

  void scatter(kit::OpContext& ctx, const Tensors& output_tensors,
               const TensorLists& input_tensors, const c10d::ScatterOptions& opts) override {
    kit::Staged output(output_tensors[0]);
    auto inputs = rank_ == opts.rootRank ? kit::joined(input_tensors[0]) : output.buffer();
    const int count = bytes(output.buffer());
    run(ctx, "MPI_Iscatter", {inputs, output.buffer()}, [&](auto r) {
      return MPI_Iscatter(inputs.data_ptr(), count, MPI_BYTE, output.data(), count, MPI_BYTE,
                          opts.rootRank, comm_, r);
    });
    output.commit();
  }

  void reduce_scatter(kit::OpContext& ctx, const Tensors& output_tensors,
                      const TensorLists& input_tensors,
                      const c10d::ReduceScatterOptions& opts) override {
    reduce_scatter_base(ctx, output_tensors[0], kit::joined(input_tensors[0]), opts);
  }

  void reduce_scatter_base(kit::OpContext& ctx, const at::Tensor& output_tensor,
                           const at::Tensor& input_tensor,
                           const c10d::ReduceScatterOptions& opts) override {
    kit::Reduction reduction(opts.reduceOp, input_tensor, output_tensor.numel());
    const auto [type, op] = mpi_reduction(reduction);
    const auto& [buffer, result] = std::tie(reduction.buffer, reduction.result);
    run(ctx, "MPI_Ireduce_scatter_block", {buffer, result}, [&](auto r) {
      return MPI_Ireduce_scatter_block(buffer.data_ptr(), result.data_ptr(),
                                       as_count(result.numel()), type, op, comm_, r);
    });
    reduction.finish(output_tensor, size_);
  }

  void alltoall_base(kit::OpContext& ctx, const at::Tensor& output_tensor,
                     const at::Tensor& input_tensor, const std::vector<int64_t>& output_split_sizes,
                     const std::vector<int64_t>& input_split_sizes,
                     const c10d::AllToAllOptions&) override {
    kit::Staged output(output_tensor);
    auto input = input_tensor.contiguous();
    auto from = byte_layout(kit::bytes_per_slice(output_split_sizes, output_tensor, size_));
    auto to = byte_layout(kit::bytes_per_slice(input_split_sizes, input_tensor, size_));
    const int *receives = from.data_ptr<int>(), *sends = to.data_ptr<int>();
    run(ctx, "MPI_Ialltoallv", {input, output.buffer(), from, to}, [&](auto r) {
      return MPI_Ialltoallv(input.data_ptr(), sends, sends + size_, MPI_BYTE, output.data(),
                            receives, receives + size_, MPI_BYTE, comm_, r);
    });
    output.commit();
  }

  void barrier(kit::OpContext& ctx, const c10d::BarrierOptions&) override {
    run(ctx, "MPI_Ibarrier", {}, [&](auto r) { return MPI_Ibarrier(comm_, r); });
  }

  void send(kit::OpContext& ctx, const Tensors& tensors, int dst_rank, int tag) override {
    run_posted(ctx, tensors[0], "MPI_Isend", false, [&](void* data, int count, MPI_Request* r) {
      return MPI_Isend(data, count, MPI_BYTE, dst_rank, tag, comm_, r);
    });
  }

  void recv(kit::OpContext& ctx, const Tensors& tensors, int src_rank, int tag) override {
    run_posted(ctx, tensors[0], "MPI_Irecv", true, [&](void* data, int count, MPI_Request* r) {
      return MPI_Irecv(data, count, MPI_BYTE, src_rank, tag, comm_, r);
    });
  }

  void close() override {
    try {
      auto in_mpi = mpi().call();
      MPI_Comm_free(&comm_);
    } catch (const LinkError&) {  // MPI was finalized: nothing is left to free
    }
  }

 private:
  MPI_Comm comm_;
  const int rank_;
  const int size_;
};

}  // namespace

std::unique_ptr<Runtime> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 const Config& config) {
  init_mpi();
  MPI_Comm comm = create_communicator(store, rank, size, config);
  check("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  return std::make_unique<MpiRuntime>(comm, rank, size);
}

}  // namespace occl_mpi::runtime
