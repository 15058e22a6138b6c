// occl_mpi's runtime: the contract generated from spec/occl_mpi.yaml
// (generated/csrc/occl_mpi_contract.hpp) in MPI calls, on occl's backend kit, which queues the
// ops, checks that every rank calls them alike, names them in errors and completes their Works.
//
// Every op posts one nonblocking MPI call on its group's communicator and tests the request
// until it completes or the op's deadline passes, since MPI has no timeouts of its own:
// collectives on the kit's worker (or the thread that waits for them), point-to-point ops on the
// kit's completion engine. Those threads call MPI at once, so MPI runs at MPI_THREAD_MULTIPLE.
// MPI cancels receives only: the request of any other op that timed out stays in flight, with
// the tensors MPI may still touch, until MPI_Finalize, and the kit fails the group's later ops.
#include "occl_mpi_contract.hpp"

#include "occl_kit/reduce.hpp"
#include "occl_kit/staging.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace occl_mpi::runtime {
namespace {

namespace kit = ::occl::kit;
using LinkError = kit::LinkError;

// How long MPI_Finalize may take at exit after an op abandoned a request: it waits for every
// process of the job, and a peer stuck in that op never comes. Past it the process leaves
// without finalizing, and mpirun ends the job.
constexpr auto kFinalizeBound = std::chrono::seconds(15);

// What this process knows of MPI. Every MPI call holds `mutex` shared; MPI_Finalize holds it
// alone and sets `finalized`, after which nothing calls MPI.
struct MpiProcess {
  std::shared_mutex mutex;
  bool finalized = false;
  // Requests of ops that timed out or were aborted, and the tensors MPI may still touch.
  std::vector<std::pair<MPI_Request, std::vector<at::Tensor>>> abandoned;
};

MpiProcess& process() {
  static auto* state = new MpiProcess();  // never destroyed: finalize_at_exit uses it
  return *state;
}

void check(const char* call, int code) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw LinkError(LinkError::Kind::System, std::string(call) + " failed: " + std::string(text, length));
}

std::shared_lock<std::shared_mutex> mpi_alive() {
  std::shared_lock<std::shared_mutex> lock(process().mutex);
  if (process().finalized) throw LinkError(LinkError::Kind::Aborted, "MPI was finalized");
  return lock;
}

void finalize_at_exit() {
  std::unique_lock<std::shared_mutex> lock(process().mutex);
  process().finalized = true;
  std::promise<void> finalized;
  if (!process().abandoned.empty()) {
    std::thread([done = finalized.get_future()] {
      if (done.wait_for(kFinalizeBound) == std::future_status::ready) return;
      std::fprintf(stderr, "occl_mpi: MPI_Finalize did not return within %lld s (an op timed out, and MPI cannot cancel its request): exiting without it\n",
                   static_cast<long long>(kFinalizeBound.count()));
      std::_Exit(1);
    }).detach();
  }
  MPI_Finalize();
  finalized.set_value();
}

const char* thread_level_name(int level) {
  static const char* names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"};
  return level >= 0 && level <= 3 ? names[level] : "unknown";
}

// Initialises MPI (finalized at exit) or adopts the MPI the process initialised itself (left to
// it to finalize); either way at MPI_THREAD_MULTIPLE.
void init_mpi() {
  std::unique_lock<std::shared_mutex> lock(process().mutex);
  int initialised = 0, finalized = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalized);
  TORCH_CHECK(!finalized && !process().finalized, "occl_mpi: MPI was finalized already, so this process can create no more groups");
  if (initialised) {
    MPI_Query_thread(&level);
  } else {
    check("MPI_Init_thread", MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &level));
    std::atexit(finalize_at_exit);
  }
  TORCH_CHECK(level == MPI_THREAD_MULTIPLE, "occl_mpi: MPI runs at ", thread_level_name(level),
              ", occl_mpi needs MPI_THREAD_MULTIPLE (its worker and completion threads call MPI); ",
              initialised ? "initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), as mpi4py does by default"
                          : "this MPI does not provide it");
}

// Every member has reached its factory, so the blocking call that creates the communicator
// waits for nobody who never comes.
void wait_for_members(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      const Config& config) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("occl_mpi/joined/" + std::to_string(r));
  store->set(keys[rank], std::vector<uint8_t>{});
  try {
    store->wait(keys, config.timeout);
  } catch (const c10::Error&) {
    std::string missing;
    for (int r = 0; r < size; ++r) missing += store->check({keys[r]}) ? "" : " " + std::to_string(r);
    TORCH_CHECK(false, "occl_mpi: cannot create ", kit::describe_group(config.group_name, rank, size, config.global_ranks_in_group),
                ": rank(s)", missing, " did not join within ", config.timeout.count(), " ms");
  }
}

// The group's communicator: MPI_COMM_WORLD's ranks for the default group, the group's global
// ranks of it for the others, this process alone for a group of one.
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
  std::vector<int> members(global.begin(), global.end());
  if (global.empty()) {
    for (int r = 0; r < size; ++r) members.push_back(r);
  }
  const bool launched_alike = global.empty() ? world_size == size : members.back() < world_size;
  TORCH_CHECK(launched_alike && members[rank] == world_rank, "occl_mpi: torch's global rank ", members[rank],
              " (", kit::describe_group(config.group_name, rank, size, global), ") is rank ", world_rank,
              " of the ", world_size, " in MPI_COMM_WORLD: start every rank with mpirun, whose ranks torch must use"
              " (import occl_mpi sets RANK and WORLD_SIZE from mpirun's)");
  wait_for_members(store, rank, size, config);
  auto lock = mpi_alive();
  if (global.empty()) {
    check("MPI_Comm_dup", MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    return comm;
  }
  MPI_Group world_group, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, size, members.data(), &group);
  check("MPI_Comm_create_group", MPI_Comm_create_group(MPI_COMM_WORLD, group, 0, &comm));
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  return comm;
}

int as_count(int64_t count) {
  TORCH_CHECK(count <= std::numeric_limits<int>::max(), "occl_mpi: ", count,
              " elements in one call, more than MPI's int counts allow (", std::numeric_limits<int>::max(), ")");
  return static_cast<int>(count);
}

// A contiguous tensor as MPI moves it: address, element count, and an MPI type of the
// element's size (the bytes move as they are, whatever the dtype).
struct Words {
  void* data;
  int count;
  MPI_Datatype type;
};

Words words(const at::Tensor& tensor) {
  static const std::map<int64_t, MPI_Datatype> types = {
      {1, MPI_UINT8_T}, {2, MPI_UINT16_T}, {4, MPI_UINT32_T}, {8, MPI_UINT64_T}, {16, MPI_C_DOUBLE_COMPLEX}};
  return {tensor.data_ptr(), as_count(tensor.numel()), types.at(tensor.element_size())};
}

// Per-rank element counts (row 0) and displacements (row 1) for the v-collectives, in a tensor
// that stays with the request: MPI reads them until it completes.
at::Tensor count_layout(const std::vector<int64_t>& counts) {
  const int64_t size = counts.size();
  auto layout = at::empty({2, size}, at::kInt);
  int* row = layout.data_ptr<int>();
  int64_t offset = 0;
  for (int64_t r = 0; r < size; ++r) {
    row[r] = as_count(counts[r]);
    row[size + r] = as_count(offset);
    offset += counts[r];
  }
  return layout;
}

// A c10d reduce op on MPI's basic ones: the input in a contiguous buffer of the dtype MPI adds in
// (float32 for half types; bool as bytes), premultiplied for PREMUL_SUM; finish() divides for
// AVG and rounds the result into the output.
struct Reduction {
  Reduction(const c10d::ReduceOp& reduce_op, const at::Tensor& input)
      : steps(kit::reduce_steps(reduce_op, input.scalar_type())),
        buffer(input.to(kit::accumulation_dtype(input.scalar_type())).contiguous()) {
    if (steps.premultiply) buffer = buffer.mul(*steps.premultiply);
    static const std::map<at::ScalarType, MPI_Datatype> types = {
        {at::kFloat, MPI_FLOAT}, {at::kDouble, MPI_DOUBLE}, {at::kChar, MPI_INT8_T}, {at::kByte, MPI_UINT8_T},
        {at::kBool, MPI_UINT8_T}, {at::kShort, MPI_INT16_T}, {at::kInt, MPI_INT32_T}, {at::kLong, MPI_INT64_T}};
    static const std::map<c10d::ReduceOp::RedOpType, MPI_Op> ops = {
        {c10d::ReduceOp::SUM, MPI_SUM}, {c10d::ReduceOp::PRODUCT, MPI_PROD}, {c10d::ReduceOp::MIN, MPI_MIN},
        {c10d::ReduceOp::MAX, MPI_MAX}, {c10d::ReduceOp::BAND, MPI_BAND}, {c10d::ReduceOp::BOR, MPI_BOR},
        {c10d::ReduceOp::BXOR, MPI_BXOR}};
    type = types.at(buffer.scalar_type());
    op = ops.at(steps.base);
  }
  void finish(at::Tensor result, const at::Tensor& output, int size) const {
    if (steps.average) result = result.is_floating_point() ? result.div(size) : result.div(size, "trunc");
    if (!result.is_same(output)) output.copy_(result.view(output.sizes()));
  }
  kit::ReduceSteps steps;
  at::Tensor buffer;
  MPI_Datatype type;
  MPI_Op op;
};

// A request in flight and the tensors it reads or writes. Released before it completed (its op
// timed out or was aborted), it is cancelled where MPI can (receives) and kept, with its
// tensors, until MPI_Finalize.
struct Request {
  Request(std::vector<at::Tensor> tensors, bool cancellable)
      : tensors(std::move(tensors)), cancellable(cancellable) {}
  ~Request() {
    if (handle == MPI_REQUEST_NULL) return;  // completed
    std::unique_lock<std::shared_mutex> lock(process().mutex);
    if (process().finalized) return;
    if (cancellable) MPI_Cancel(&handle);
    process().abandoned.emplace_back(handle, std::move(tensors));
  }
  bool test(MPI_Status* status) {
    auto alive = mpi_alive();
    int done = 0;
    check("MPI_Test", MPI_Test(&handle, &done, status));
    return done != 0;
  }
  MPI_Request handle = MPI_REQUEST_NULL;
  std::vector<at::Tensor> tensors;
  bool cancellable;
};

// Rows of `gathered` (one per rank) into each rank's output tensor, and back.
void split_rows(const at::Tensor& gathered, const std::vector<at::Tensor>& outputs) {
  for (size_t r = 0; r < outputs.size(); ++r) outputs[r].copy_(gathered[r].view(outputs[r].sizes()));
}

at::Tensor joined(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  for (const auto& tensor : tensors) flat.push_back(tensor.reshape(-1));
  return at::cat(flat);
}

class MpiRuntime final : public Runtime {
 public:
  MpiRuntime(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  void exchange_signatures(kit::OpContext& ctx, const void* mine, void* everyone, size_t bytes) override {
    // Copies that outlive a timed-out exchange, which MPI may complete later.
    auto record = at::empty({static_cast<int64_t>(bytes)}, at::kByte);
    auto all = at::empty({size_, static_cast<int64_t>(bytes)}, at::kByte);
    std::memcpy(record.data_ptr(), mine, bytes);
    run(ctx, "MPI_Iallgather of every rank's signature of the op", {record, all}, [&](MPI_Request* request) {
      const int count = as_count(bytes);
      return MPI_Iallgather(record.data_ptr(), count, MPI_BYTE, all.data_ptr(), count, MPI_BYTE, comm_, request);
    });
    std::memcpy(everyone, all.data_ptr(), all.nbytes());
  }

  void broadcast(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    kit::Staged data(tensors[0]);
    run(ctx, "MPI_Ibcast", {data.buffer()}, [&](MPI_Request* request) {
      auto w = words(data.buffer());
      return MPI_Ibcast(w.data, w.count, w.type, opts.rootRank, comm_, request);
    });
    data.commit();
  }

  void allreduce(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    Reduction r(opts.reduceOp, tensors[0]);
    run(ctx, "MPI_Iallreduce", {r.buffer}, [&](MPI_Request* request) {
      return MPI_Iallreduce(MPI_IN_PLACE, r.buffer.data_ptr(), as_count(r.buffer.numel()), r.type, r.op, comm_, request);
    });
    r.finish(r.buffer, tensors[0], size_);
  }

  void reduce(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    Reduction r(opts.reduceOp, tensors[0]);
    auto result = at::empty({rank_ == opts.rootRank ? r.buffer.numel() : 0}, r.buffer.options());
    run(ctx, "MPI_Ireduce", {r.buffer, result}, [&](MPI_Request* request) {
      return MPI_Ireduce(r.buffer.data_ptr(), result.data_ptr(), as_count(r.buffer.numel()), r.type, r.op, opts.rootRank, comm_, request);
    });
    if (rank_ == opts.rootRank) r.finish(result, tensors[0], size_);
  }

  void allgather(kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
                 const std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) override {
    auto gathered = at::empty({size_, input_tensors[0].numel()}, input_tensors[0].options());
    allgather_base(ctx, gathered, input_tensors[0], opts);
    split_rows(gathered, output_tensors[0]);
  }

  void allgather_base(kit::OpContext& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor,
                      const c10d::AllgatherOptions&) override {
    kit::Staged output(output_tensor);
    auto input = input_tensor.contiguous();
    run(ctx, "MPI_Iallgather", {input, output.buffer()}, [&](MPI_Request* request) {
      auto w = words(input);
      return MPI_Iallgather(w.data, w.count, w.type, output.data(), w.count, w.type, comm_, request);
    });
    output.commit();
  }

  void gather(kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
              const std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) override {
    auto input = input_tensors[0].contiguous();
    auto gathered = at::empty({rank_ == opts.rootRank ? size_ : 0, input.numel()}, input.options());
    run(ctx, "MPI_Igather", {input, gathered}, [&](MPI_Request* request) {
      auto w = words(input);
      return MPI_Igather(w.data, w.count, w.type, gathered.data_ptr(), w.count, w.type, opts.rootRank, comm_, request);
    });
    if (rank_ == opts.rootRank) split_rows(gathered, output_tensors[0]);
  }

  void scatter(kit::OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
               const std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ScatterOptions& opts) override {
    kit::Staged output(output_tensors[0]);
    auto inputs = rank_ == opts.rootRank ? joined(input_tensors[0]) : at::empty({0}, output.buffer().options());
    run(ctx, "MPI_Iscatter", {inputs, output.buffer()}, [&](MPI_Request* request) {
      auto w = words(output.buffer());
      return MPI_Iscatter(inputs.data_ptr(), w.count, w.type, w.data, w.count, w.type, opts.rootRank, comm_, request);
    });
    output.commit();
  }

  void reduce_scatter(kit::OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
                      const std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ReduceScatterOptions& opts) override {
    reduce_scatter_base(ctx, output_tensors[0], joined(input_tensors[0]), opts);
  }

  void reduce_scatter_base(kit::OpContext& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor,
                           const c10d::ReduceScatterOptions& opts) override {
    Reduction r(opts.reduceOp, input_tensor);
    auto result = at::empty({output_tensor.numel()}, r.buffer.options());
    run(ctx, "MPI_Ireduce_scatter_block", {r.buffer, result}, [&](MPI_Request* request) {
      return MPI_Ireduce_scatter_block(r.buffer.data_ptr(), result.data_ptr(), as_count(result.numel()), r.type, r.op, comm_, request);
    });
    r.finish(result, output_tensor, size_);
  }

  void alltoall_base(kit::OpContext& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor,
                     const std::vector<int64_t>& output_split_sizes, const std::vector<int64_t>& input_split_sizes,
                     const c10d::AllToAllOptions&) override {
    const auto elements = [&](const std::vector<int64_t>& split_sizes, const at::Tensor& tensor) {
      auto counts = kit::bytes_per_slice(split_sizes, tensor, size_);
      for (auto& count : counts) count /= tensor.element_size();
      return count_layout(counts);
    };
    alltoallv(ctx, output_tensor, input_tensor.contiguous(), elements(output_split_sizes, output_tensor),
              elements(input_split_sizes, input_tensor));
  }

  void alltoall(kit::OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
                const std::vector<at::Tensor>& input_tensors, const c10d::AllToAllOptions&) override {
    auto output = joined(output_tensors);
    alltoallv(ctx, output, joined(input_tensors), count_layout(kit::numels_of(output_tensors)),
              count_layout(kit::numels_of(input_tensors)));
    int64_t offset = 0;
    for (const auto& tensor : output_tensors) {
      tensor.copy_(output.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  }

  void barrier(kit::OpContext& ctx, const c10d::BarrierOptions&) override {
    run(ctx, "MPI_Ibarrier", {}, [&](MPI_Request* request) { return MPI_Ibarrier(comm_, request); });
  }

  void send(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int dst_rank, int tag) override {
    auto data = std::make_shared<kit::Staged>(tensors[0]);
    post(ctx, data, "MPI_Isend", false, [&](Words w, MPI_Request* request) {
      return MPI_Isend(w.data, w.count, w.type, dst_rank, tag, comm_, request);
    });
  }

  void recv(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int src_rank, int tag) override {
    receive(ctx, tensors[0], src_rank, tag);
  }

  void recv_anysource(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int tag) override {
    receive(ctx, tensors[0], MPI_ANY_SOURCE, tag);
  }

  void close() override {
    std::shared_lock<std::shared_mutex> lock(process().mutex);
    if (!process().finalized) MPI_Comm_free(&comm_);
  }

  void abort() override { aborted_ = true; }

 private:
  // Posts a queued op's nonblocking call and tests its request until it completes, the op's
  // deadline passes or the group is aborted.
  void run(kit::OpContext& ctx, const char* call, std::vector<at::Tensor> tensors,
           const std::function<int(MPI_Request*)>& start) {
    Request request(std::move(tensors), /*cancellable=*/false);
    {
      auto alive = mpi_alive();
      check(call, start(&request.handle));
    }
    const bool completed = kit::poll_until(ctx.deadline, [&] {
      if (aborted_) throw LinkError(LinkError::Kind::Aborted, "the communicator was aborted");
      return request.test(MPI_STATUS_IGNORE);
    });
    if (!completed) {
      throw LinkError(LinkError::Kind::Timeout, std::string(call) + " did not complete: a rank did not call this op, or is still in an earlier one");
    }
  }

  // Posts a point-to-point call on `data` and hands its request to the kit's completion engine,
  // which completes the op (writing a received message into the user's tensor).
  void post(kit::OpContext& ctx, std::shared_ptr<kit::Staged> data, const char* call, bool receive,
            const std::function<int(Words, MPI_Request*)>& start) {
    auto request = std::make_shared<Request>(std::vector<at::Tensor>{data->buffer()}, receive);
    {
      auto alive = mpi_alive();
      check(call, start(words(data->buffer()), &request->handle));
    }
    ctx.complete_when([request, data, receive] {
      MPI_Status status;
      if (!request->test(&status)) return kit::Poll{};
      if (receive) data->commit();
      return kit::Poll{true, receive ? status.MPI_SOURCE : -1};
    });
  }

  void receive(kit::OpContext& ctx, const at::Tensor& tensor, int source, int tag) {
    post(ctx, std::make_shared<kit::Staged>(tensor), "MPI_Irecv", true, [&](Words w, MPI_Request* request) {
      return MPI_Irecv(w.data, w.count, w.type, source, tag, comm_, request);
    });
  }

  void alltoallv(kit::OpContext& ctx, const at::Tensor& output_tensor, const at::Tensor& input,
                 const at::Tensor& receive_layout, const at::Tensor& send_layout) {
    kit::Staged output(output_tensor);
    run(ctx, "MPI_Ialltoallv", {input, output.buffer(), receive_layout, send_layout}, [&](MPI_Request* request) {
      const int* sends = send_layout.data_ptr<int>();
      const int* receives = receive_layout.data_ptr<int>();
      const MPI_Datatype type = words(input).type;
      return MPI_Ialltoallv(input.data_ptr(), sends, sends + size_, type, output.data(), receives,
                            receives + size_, type, comm_, request);
    });
    output.commit();
  }

  MPI_Comm comm_;
  const int rank_;
  const int size_;
  std::atomic<bool> aborted_{false};
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
