#include "occl_kit/flight_recorder.hpp"

#include <c10/util/Exception.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unordered_map>

namespace occl::kit {
namespace {

constexpr size_t kDefaultCapacity = 500;
constexpr const char* kDefaultDumpPrefix = "/tmp/occl_trace_rank_";
constexpr const char* kFormatVersion = "2.10";  // torch's FlightRecorder.hpp, version_val

// The first of torch's variables that is set (current name first, then NCCL's older one).
const char* env(const char* name, const char* older) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : std::getenv(older);
}

// How torch's analyser names the op of a c10d method (its COLLECTIVES, as NCCL records them).
std::string analyser_name(const std::string& method) {
  static const std::unordered_map<std::string, std::string> names = {
      {"allreduce", "all_reduce"},
      {"allreduce_sparse", "all_reduce"},
      {"allgather", "all_gather"},
      {"_allgather_base", "_all_gather_base"},
      {"allgather_coalesced", "ALLGATHER_coalesced"},
      {"allgather_into_tensor_coalesced", "all_gather_into_tensor_coalesced"},
      {"alltoall_base", "all_to_all_single"},
      {"alltoall", "all_to_all"},
  };
  const auto it = names.find(method);
  return it == names.end() ? method : it->second;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `tensors` as torch's recorder keeps them; `stacked`: as one tensor stacking them (all alike),
// as NCCL records the list side of all_gather and reduce_scatter, and as the analyser checks it.
template <typename Shapes>
Shapes shapes_of(const std::vector<at::Tensor>& tensors, bool stacked) {
  Shapes shapes;
  if (stacked && !tensors.empty()) {
    shapes.dims.push_back(tensors[0].dim() + 1);
    shapes.sizes.push_back(static_cast<int64_t>(tensors.size()));
    shapes.sizes.append(tensors[0].sizes().begin(), tensors[0].sizes().end());
    shapes.dtypes.push_back(tensors[0].scalar_type());
    return shapes;
  }
  for (const auto& t : tensors) {
    shapes.dims.push_back(t.dim());
    shapes.sizes.append(t.sizes().begin(), t.sizes().end());
    shapes.dtypes.push_back(t.scalar_type());
  }
  return shapes;
}

// "[0, 1, 2]", as torch writes a group's ranks.
std::string ranks_text(const std::vector<uint64_t>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

// Python's pickle protocol 2, for the few kinds of values a dump holds. Containers are written
// as opened, then items, then closed, so the dump streams without a tree of values.
class Pickle {
 public:
  Pickle() { out_ += "\x80\x02"; }
  std::string finish() { return out_ + "."; }

  void open_dict() { out_ += "}("; }
  void close_dict() { out_ += 'u'; }
  void open_list() { out_ += "]("; }
  void close_list() { out_ += 'e'; }
  void none() { out_ += 'N'; }
  void boolean(bool value) { out_ += value ? '\x88' : '\x89'; }
  void integer(int64_t value) {
    if (value >= INT32_MIN && value <= INT32_MAX) {
      out_ += 'J';
      append_le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(value))), 4);
    } else {
      out_ += "\x8a\x08";  // LONG1, 8 bytes, little-endian two's complement
      append_le(static_cast<uint64_t>(value), 8);
    }
  }
  void text(const std::string& value) {
    out_ += 'X';
    append_le(value.size(), 4);
    out_ += value;
  }
  void pair(const std::string& first, const std::string& second) {
    text(first);
    text(second);
    out_ += '\x86';  // TUPLE2
  }
  void optional_integer(const std::optional<int64_t>& value) {
    if (value) integer(*value);
    else none();
  }
  template <typename Shapes>
  void sizes(const Shapes& shapes) {
    open_list();
    auto size = shapes.sizes.begin();
    for (int64_t dims : shapes.dims) {
      open_list();
      for (int64_t d = 0; d < dims; ++d) integer(*size++);
      close_list();
    }
    close_list();
  }
  template <typename Shapes>
  void dtypes(const Shapes& shapes) {
    open_list();
    for (c10::ScalarType dtype : shapes.dtypes) text(c10::toString(dtype));
    close_list();
  }

 private:
  void append_le(uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((value >> (8 * i)) & 0xff);
  }
  std::string out_;
};

}  // namespace

FlightRecorder& FlightRecorder::get() {
  // Never destroyed: ops may complete on other threads while the process exits.
  static auto* recorder = new FlightRecorder();
  return *recorder;
}

FlightRecorder::FlightRecorder()
    : capacity_([] {
        const char* size = env("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE");
        return size != nullptr ? std::strtoull(size, nullptr, 10) : kDefaultCapacity;
      }()) {
  entries_.resize(capacity_);
}

size_t FlightRecorder::add_group(std::vector<uint64_t> global_ranks, int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  global_rank_ = static_cast<int64_t>(global_ranks.at(rank));
  groups_.push_back({"", "", std::move(global_ranks)});
  return groups_.size() - 1;
}

int64_t FlightRecorder::record(size_t pg_id, const std::string& uid, const std::string& desc,
                               const char* label, uint64_t sequence,
                               const std::vector<at::Tensor>& inputs,
                               const std::vector<at::Tensor>& outputs,
                               std::chrono::milliseconds timeout) {
  if (capacity_ == 0) return -1;
  Entry entry;
  entry.pg_id = pg_id;
  entry.sequence = sequence;
  entry.created_ns = now_ns();
  entry.timeout_ms = timeout.count();
  std::lock_guard<std::mutex> lock(mutex_);
  auto op = ops_.find(label);
  if (op == ops_.end()) {
    const char* dot = std::strchr(label, '.');
    const std::string method = dot != nullptr ? dot + 1 : label;
    op = ops_.emplace(label, Op{"gloo:" + analyser_name(method), method == "reduce_scatter",
                                method == "allgather"}).first;
  }
  entry.op = &op->second;
  entry.inputs = shapes_of<Shapes>(inputs, op->second.stacked_inputs);
  entry.outputs = shapes_of<Shapes>(outputs, op->second.stacked_outputs);
  Group& group = groups_.at(pg_id);
  if (group.uid != uid) group.uid = uid;
  if (group.desc != desc) group.desc = desc;
  group.last_enqueued = static_cast<int64_t>(sequence);
  entry.id = next_id_++;
  entries_[entry.id % capacity_] = std::move(entry);
  return next_id_ - 1;
}

FlightRecorder::Entry* FlightRecorder::find(int64_t id) {
  if (id < 0 || capacity_ == 0) return nullptr;
  Entry& entry = entries_[id % capacity_];
  return entry.id == id ? &entry : nullptr;
}

void FlightRecorder::started(int64_t id) {
  if (id < 0) return;  // not recorded (point-to-point, or no buffer): no lock to take
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* entry = find(id)) {
    entry->started_ns = now_ns();
    groups_[entry->pg_id].last_started = static_cast<int64_t>(entry->sequence);
  }
}

void FlightRecorder::finished(int64_t id, bool ok) {
  if (id < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Entry* entry = find(id);
  if (entry == nullptr || entry->retired) return;
  entry->retired = true;
  if (ok) {
    entry->completed_ns = now_ns();
    groups_[entry->pg_id].last_completed = static_cast<int64_t>(entry->sequence);
  }
}

std::vector<FlightRecorder::Entry> FlightRecorder::kept() const {
  const int64_t first = std::max<int64_t>(0, next_id_ - static_cast<int64_t>(capacity_));
  std::vector<Entry> entries;
  for (int64_t id = first; id < next_id_; ++id) entries.push_back(entries_[id % capacity_]);
  return entries;
}

std::string FlightRecorder::pickle(const std::vector<Entry>& entries,
                                   const std::vector<size_t>& groups,
                                   const std::string& comm_lib_version) const {
  Pickle p;
  p.open_dict();
  p.text("version");
  p.text(kFormatVersion);
  p.text("pg_config");
  p.open_dict();
  for (size_t pg_id : groups) {
    const Group& group = groups_[pg_id];
    if (group.uid.empty()) continue;  // no collective yet
    p.text(group.uid);
    p.open_dict();
    p.text("name");
    p.text(group.uid);
    p.text("desc");
    p.text(group.desc);
    p.text("ranks");
    p.text(ranks_text(group.global_ranks));
    p.close_dict();
  }
  p.close_dict();
  p.text("comm_lib_version");
  p.text(comm_lib_version);
  p.text("pg_status");
  p.open_dict();
  for (size_t pg_id : groups) {
    p.text(std::to_string(pg_id));
    p.open_dict();
    p.text("last_enqueued_collective");
    p.integer(groups_[pg_id].last_enqueued);
    p.text("last_started_collective");
    p.integer(groups_[pg_id].last_started);
    p.text("last_completed_collective");
    p.integer(groups_[pg_id].last_completed);
    p.close_dict();
  }
  p.close_dict();
  p.text("entries");
  p.open_list();
  for (const Entry& e : entries) {
    const Group& group = groups_[e.pg_id];
    p.open_dict();
    p.text("record_id");
    p.integer(e.id);
    p.text("pg_id");
    p.integer(static_cast<int64_t>(e.pg_id));
    p.text("process_group");
    p.pair(group.uid, group.desc);
    p.text("thread_name");
    p.text("");
    p.text("thread_id");
    p.text("");
    p.text("collective_seq_id");
    p.integer(static_cast<int64_t>(e.sequence));
    p.text("p2p_seq_id");
    p.integer(0);
    p.text("op_id");
    p.integer(static_cast<int64_t>(e.sequence));
    p.text("profiling_name");
    p.text(e.op->profiling_name);
    p.text("time_created_ns");
    p.integer(e.created_ns);
    p.text("input_sizes");
    p.sizes(e.inputs);
    p.text("input_dtypes");
    p.dtypes(e.inputs);
    p.text("output_sizes");
    p.sizes(e.outputs);
    p.text("output_dtypes");
    p.dtypes(e.outputs);
    p.text("state");
    p.text(e.completed_ns ? "completed" : e.started_ns ? "started" : "scheduled");
    p.text("time_discovered_started_ns");
    p.optional_integer(e.started_ns);
    p.text("time_discovered_completed_ns");
    p.optional_integer(e.completed_ns);
    p.text("retired");
    p.boolean(e.retired);
    p.text("timeout_ms");
    p.integer(e.timeout_ms);
    p.text("is_p2p");
    p.boolean(false);
    p.close_dict();
  }
  p.close_list();
  p.close_dict();
  return p.finish();
}

std::string FlightRecorder::dump() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<size_t> groups(groups_.size());
  for (size_t pg_id = 0; pg_id < groups.size(); ++pg_id) groups[pg_id] = pg_id;
  return pickle(kept(), groups, "occl");
}

std::string FlightRecorder::write(const std::string& data, int64_t global_rank,
                                  bool replace) const {
  const char* prefix = env("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
  const std::string path =
      std::string(prefix != nullptr ? prefix : kDefaultDumpPrefix) + std::to_string(global_rank);
  // Whole or not at all: a reader never sees half a dump, and two ranks may write at once.
  const std::string partial = path + ".partial." + std::to_string(::getpid());
  std::ofstream file(partial, std::ios::binary | std::ios::trunc);
  file.write(data.data(), static_cast<std::streamsize>(data.size()));
  file.close();
  bool written = static_cast<bool>(file);
  if (written && replace) {
    written = std::rename(partial.c_str(), path.c_str()) == 0;
  } else if (written) {
    written = ::link(partial.c_str(), path.c_str()) == 0 || errno == EEXIST;
    ::unlink(partial.c_str());
  }
  TORCH_CHECK(written, "cannot write the flight recorder's dump to ", path, ": ",
              std::strerror(errno));
  return path;
}

std::string FlightRecorder::write_dump() {
  const std::string data = dump();
  std::lock_guard<std::mutex> lock(mutex_);
  return write(data, global_rank_, /*replace=*/true);
}

std::string FlightRecorder::write_stand_in(size_t pg_id, int awaited, uint64_t sequence,
                                           bool joined) {
  std::string data;
  int64_t global_rank;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Entry> reported;
    for (Entry e : kept()) {
      if (e.pg_id != pg_id || e.sequence > sequence || (e.sequence == sequence && !joined)) {
        continue;
      }
      if (e.sequence == sequence) {
        e.completed_ns.reset();
        e.retired = false;
      }
      reported.push_back(std::move(e));
    }
    global_rank = static_cast<int64_t>(groups_[pg_id].global_ranks.at(awaited));
    data = pickle(reported, {pg_id},
                  "occl (written by rank " + std::to_string(global_rank_) + " for rank " +
                      std::to_string(global_rank) +
                      ", which did not answer: what it last reported)");
  }
  return write(data, global_rank, /*replace=*/false);  // the rank's own dump stays
}

}  // namespace occl::kit
