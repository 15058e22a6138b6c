// The last collectives of every group of this process, kept as torch's flight recorder keeps
// NCCL's (torch/csrc/distributed/c10d/FlightRecorder.hpp) and dumped in its format, so that
// torch's analyser merges the ranks' dumps:
//   python -m torch.distributed.flight_recorder.fr_trace <dir> --allow-incomplete-ranks
//
// torch's environment variables: TORCH_FR_BUFFER_SIZE entries are kept (default 500; 0 keeps
// none), and a dump goes to TORCH_FR_DUMP_TEMP_FILE followed by the process's global rank
// (default /tmp/occl_trace_rank_<rank>). The engine writes one when a group's link fails (a
// timeout, a dead or failed peer) and names the file in the error; a call writes one on demand.
//
// A rank that cannot dump (stopped, hung) would leave the analyser without its record, and so
// unable to say where it stands. A rank that times out waiting for others therefore also writes,
// under each awaited rank's name, what that rank last reported: the group's collectives it
// joined (sent its signature for, see signature.hpp), as this rank recorded them, the last one
// started if it joined the one timed out in. Its comm_lib_version says so; the awaited rank's own
// dump, if it ever writes one, replaces it.
//
// An entry is "scheduled" when issued, "started" when it runs, "completed" when it succeeded; a
// failed one is "retired" but not completed (torch's reading: it timed out or failed). The
// analyser knows only its own op names and library prefixes: entries name ops as torch does
// (all_reduce, _all_gather_base, ...), under "gloo:", the CPU library it knows.
// Point-to-point ops are not recorded: the analyser needs their peers, which the engine does not
// see.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <c10/util/SmallVector.h>

namespace occl::kit {

class FlightRecorder {
 public:
  static FlightRecorder& get();
  bool enabled() const { return capacity_ > 0; }

  // A group whose collectives are recorded: its global ranks (0..size-1 for the default group),
  // and which of them this process is. Returns its id (torch's pg_id).
  size_t add_group(std::vector<uint64_t> global_ranks, int rank);

  // A collective issued on group `pg_id` under torch's group name `uid` and description `desc`
  // (which torch may set after the group was made): op `label` ("occl.allreduce", static) with
  // the group's sequence number `sequence`. Returns its record id, or -1 when nothing is kept.
  int64_t record(size_t pg_id, const std::string& uid, const std::string& desc,
                 const char* label, uint64_t sequence,
                 const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
                 std::chrono::milliseconds timeout);
  void started(int64_t id);
  // Completed, or (`ok` false) retired without completing.
  void finished(int64_t id, bool ok);

  // Everything kept, pickled as torch's dump_fr_trace pickles its own (version 2.10).
  std::string dump();
  // Writes dump() where TORCH_FR_DUMP_TEMP_FILE says, for this process's global rank. Returns
  // the path; throws naming it when the file cannot be written.
  std::string write_dump();
  // Writes, under the name of rank `awaited` of group `pg_id`, what it last reported to this
  // rank: the group's collectives before `sequence`, and `sequence` itself, started, if
  // `joined`; unless a dump is there already. Returns the path; throws naming it when the file
  // cannot be written.
  std::string write_stand_in(size_t pg_id, int awaited, uint64_t sequence, bool joined);

 private:
  FlightRecorder();

  // How an op is recorded, by its label (OpInfo::label, static).
  struct Op {
    std::string profiling_name;  // "gloo:all_reduce"
    bool stacked_inputs, stacked_outputs;  // recorded as one stacked tensor (shapes_of)
  };
  // Tensors' shapes and dtypes, flat as torch's recorder keeps them: recording a few small
  // tensors allocates nothing.
  struct Shapes {
    c10::SmallVector<int64_t, 4> dims;   // per tensor
    c10::SmallVector<int64_t, 8> sizes;  // every tensor's, in order
    c10::SmallVector<c10::ScalarType, 4> dtypes;
  };
  struct Entry {
    int64_t id = -1;
    size_t pg_id = 0;
    uint64_t sequence = 0;
    const Op* op = nullptr;  // in ops_
    Shapes inputs, outputs;
    int64_t created_ns = 0;
    std::optional<int64_t> started_ns, completed_ns;
    bool retired = false;
    int64_t timeout_ms = 0;
  };
  struct Group {
    std::string uid, desc;
    std::vector<uint64_t> global_ranks;
    int64_t last_enqueued = -1, last_started = -1, last_completed = -1;
  };
  Entry* find(int64_t id);  // the entry, if still kept; with mutex_ held
  std::vector<Entry> kept() const;  // in record order; with mutex_ held
  // torch's dump of `entries` (of `groups`), with mutex_ held.
  std::string pickle(const std::vector<Entry>& entries, const std::vector<size_t>& groups,
                     const std::string& comm_lib_version) const;
  // Writes `data` as the dump of `global_rank`; unless `replace`, a dump there already stays.
  std::string write(const std::string& data, int64_t global_rank, bool replace) const;

  const size_t capacity_;
  std::mutex mutex_;
  std::vector<Entry> entries_;  // a ring: record id % capacity_
  int64_t next_id_ = 0;
  std::vector<Group> groups_;  // by pg_id
  std::unordered_map<const char*, Op> ops_;  // by label
  int64_t global_rank_ = -1;
};

}  // namespace occl::kit
