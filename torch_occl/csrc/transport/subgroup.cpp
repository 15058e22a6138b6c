#include "subgroup.hpp"

#include "auth.hpp"
#include "memfd.hpp"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>

namespace occl::transport {
namespace {

constexpr uint32_t kSubgroupMagic = 0x4f434c53;  // "OCLS"
// A member connects and sends its Join at once; anything slower is not a member.
constexpr auto kJoinTimeout = std::chrono::seconds(1);
// The p2p engine completes every request by its deadline; past this, something is badly wrong.
constexpr auto kCompletionGrace = std::chrono::seconds(5);

// What each member tells the others first.
struct MemberRecord {
  uint32_t magic;
  int32_t pid;
  int32_t region_fd;  // the shared-memory leader's memfd; -1 from the others, or if it failed
  int32_t collective_port;
  int32_t p2p_port;
  Nonce collective_nonce;  // what connectors to each listener present
  Nonce p2p_nonce;
  char host[128];            // where the listeners are, NUL-terminated
  char region_failure[160];  // why the leader has no region, NUL-terminated
};

// Then whether it mapped the leader's region (empty) or why not.
struct MappedRecord {
  char failure[200];
};

// Connector -> acceptor, and the acceptor's answer (its own rank, no nonce).
struct Join {
  uint32_t magic;
  int32_t rank;
  Nonce nonce;
};

// The leader's memfd and the mapping of it, until the links own the mapping.
struct Region {
  int fd = -1;
  Mapping mapping;
  void close_fd() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  ~Region() {
    close_fd();
    if (mapping.base) unmap(mapping);
  }
};

void copy_text(char* to, size_t capacity, const std::string& text) {
  std::strncpy(to, text.c_str(), capacity - 1);
  to[capacity - 1] = '\0';
}

std::string list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

// Every member's `mine`, in member order, exchanged on the group's p2p links. A member that
// does not take part by `deadline` is named by its rank in the group.
template <typename Record>
std::vector<Record> allgather_among(P2PEngine& p2p, const std::vector<int>& members, int me,
                                    const Record& mine, int64_t tag, Deadline deadline) {
  // Shared with the completions, which may outlive this call when it throws early.
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<Record> records;
    std::vector<bool> arrived;
    size_t pending = 0;
    std::exception_ptr error;
    bool timed_out = false;
  };
  auto state = std::make_shared<State>();
  state->records.assign(members.size(), Record{});
  state->records[me] = mine;
  state->arrived.assign(members.size(), false);
  state->arrived[me] = true;
  state->pending = 2 * (members.size() - 1);
  auto completion = [state](size_t from) {
    return [state, from](std::exception_ptr error, int) {
      std::lock_guard<std::mutex> lock(state->mutex);
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const TransportError& e) {
          if (e.kind() == TransportError::Kind::Timeout) state->timed_out = true;
          else if (!state->error) state->error = error;
        } catch (...) {
          if (!state->error) state->error = error;
        }
      } else if (from < state->arrived.size()) {
        state->arrived[from] = true;
      }
      --state->pending;
      state->changed.notify_all();
    };
  };
  for (size_t i = 0; i < members.size(); ++i) {
    if (static_cast<int>(i) == me) continue;
    p2p.send(members[i], tag, &state->records[me], sizeof(Record), deadline,
             completion(members.size()));
    p2p.recv(members[i], tag, &state->records[i], sizeof(Record), deadline, completion(i));
  }
  // This thread waits below without moving the rings: the engine's thread must read for it (a
  // receive is otherwise left to its waiter, and sat in the ring until the thread's next look,
  // up to a second later).
  p2p.handoff()();
  std::unique_lock<std::mutex> lock(state->mutex);
  const bool settled = state->changed.wait_until(lock, deadline + kCompletionGrace, [&] {
    return state->pending == 0 || state->error;
  });
  if (state->error) std::rethrow_exception(state->error);
  if (!settled || state->timed_out) {
    std::vector<int> absent;
    for (size_t i = 0; i < members.size(); ++i) {
      if (!state->arrived[i]) absent.push_back(members[i]);
    }
    throw TransportError(TransportError::Kind::Timeout,
                         "timed out waiting for rank(s) " + list(absent) +
                             " of the group to split too (every rank of the group must call "
                             "split_group, in the same order)");
  }
  return state->records;
}

// One connection to every other member on one channel: this member connects to the lower ones
// and accepts the higher ones, as the bootstrap does.
std::vector<Socket> join_members(const Socket& listener, const Nonce& own_nonce, int me,
                                 const std::vector<MemberRecord>& records,
                                 int32_t MemberRecord::*port, Nonce MemberRecord::*nonce,
                                 Deadline deadline) {
  const int size = static_cast<int>(records.size());
  std::vector<Socket> links(static_cast<size_t>(size));
  for (int peer = 0; peer < me; ++peer) {
    const MemberRecord& record = records[peer];
    Socket socket = Socket::connect(record.host, record.*port, deadline);
    const Join join{kSubgroupMagic, me, record.*nonce};
    socket.send_all(&join, sizeof(join), deadline);
    Join answer{};
    socket.recv_all(&answer, sizeof(answer), deadline);
    if (answer.magic != kSubgroupMagic || answer.rank != peer) {
      throw TransportError(TransportError::Kind::Protocol,
                           "member " + std::to_string(peer) + " answered wrongly at " +
                               record.host + ":" + std::to_string(record.*port));
    }
    links[peer] = std::move(socket);
  }
  for (int missing = size - 1 - me; missing > 0;) {
    Socket socket = listener.accept(deadline);
    if (!socket.valid()) {
      throw TransportError(TransportError::Kind::Timeout,
                           std::to_string(missing) + " higher member(s) did not connect");
    }
    Join join{};
    try {
      socket.recv_all(&join, sizeof(join), std::min(deadline, Clock::now() + kJoinTimeout));
    } catch (const TransportError&) {
      continue;  // not a member: dropped
    }
    if (join.magic != kSubgroupMagic || join.nonce != own_nonce || join.rank <= me ||
        join.rank >= size || links[join.rank].valid()) {
      continue;  // not a member (or a member twice): dropped without a word
    }
    const Join answer{kSubgroupMagic, me, Nonce{}};
    socket.send_all(&answer, sizeof(answer), deadline);
    links[join.rank] = std::move(socket);
    --missing;
  }
  return links;
}

// The members' hosts (SharedMemory::hosts), numbered anew in the order of their lowest members.
std::vector<int> member_hosts(const std::vector<int>& group_hosts, const std::vector<int>& members) {
  if (group_hosts.empty()) return {};
  std::vector<int> seen;  // group host numbers, in the order the members meet them
  std::vector<int> hosts;
  for (int member : members) {
    const auto at = std::find(seen.begin(), seen.end(), group_hosts[member]);
    hosts.push_back(static_cast<int>(at - seen.begin()));
    if (at == seen.end()) seen.push_back(group_hosts[member]);
  }
  return hosts;
}

}  // namespace

SubgroupLinks form_subgroup(P2PEngine& group_p2p, const Mesh& group,
                            const std::vector<int>& members, const SubgroupOptions& options,
                            Deadline deadline) {
  const int size = static_cast<int>(members.size());
  const int me = static_cast<int>(
      std::find(members.begin(), members.end(), group.rank()) - members.begin());

  // The members on this host: those the group reaches through shared memory. The lowest of them
  // creates the subgroup's region before anyone speaks, so one exchange tells the others where.
  std::vector<int> local;  // subgroup ranks
  const ShmLinks* group_shm = group.shm_links();
  if (group_shm && size > 1) {
    for (int i = 0; i < size; ++i) {
      if (group_shm->reaches(members[i])) local.push_back(i);
    }
  }
  const bool sharing = local.size() >= 2;
  const size_t region_bytes =
      sharing ? ShmLinks::region_bytes(static_cast<int>(local.size()), options.shm.ring_bytes) : 0;
  Region region;
  std::string failure;
  if (sharing && local.front() == me) {
    try {
      region.fd = create_memfd(region_bytes);
      region.mapping = map_memfd(region.fd, region_bytes);
    } catch (const TransportError& e) {
      failure = e.what();
    }
  }

  Socket collective_listener = Socket::listen(options.bind_address);
  Socket p2p_listener = Socket::listen(options.bind_address);
  MemberRecord mine{};
  mine.magic = kSubgroupMagic;
  mine.pid = static_cast<int32_t>(::getpid());
  mine.region_fd = region.mapping.base ? region.fd : -1;
  mine.collective_port = collective_listener.port();
  mine.p2p_port = p2p_listener.port();
  mine.collective_nonce = random_nonce();
  mine.p2p_nonce = random_nonce();
  copy_text(mine.host, sizeof(mine.host), advertised_host(options.bind_address));
  copy_text(mine.region_failure, sizeof(mine.region_failure), failure);
  const auto records = allgather_among(group_p2p, members, me, mine, options.tag, deadline);
  for (int i = 0; i < size; ++i) {
    if (records[i].magic != kSubgroupMagic) {
      throw TransportError(TransportError::Kind::Protocol,
                           "member " + std::to_string(i) + " sent a malformed record");
    }
  }

  // Every member says whether it mapped its host's region (every one: a member cannot tell
  // whether those of other hosts share one); all read every answer, so they agree on using it.
  const bool mapper = sharing && local.front() != me;
  if (mapper) {
    const MemberRecord& leader = records[local.front()];
    if (leader.region_fd < 0) {
      failure = std::string("the leader could not create it: ") + leader.region_failure;
    } else {
      try {
        region.mapping = map_peer_memfd(leader.pid, leader.region_fd, region_bytes,
                                        Access::ReadWrite);
      } catch (const TransportError& e) {
        failure = e.what();
      }
    }
  }
  MappedRecord mapped{};
  copy_text(mapped.failure, sizeof(mapped.failure), failure);
  const auto answers = allgather_among(group_p2p, members, me, mapped, options.tag + 1, deadline);
  region.close_fd();  // every mapping holds the region from here on

  SubgroupLinks links;
  std::string first_failure;
  for (int i : local) {
    if (answers[i].failure[0] != '\0' && first_failure.empty()) {
      first_failure = "member " + std::to_string(i) + ": " + answers[i].failure;
    }
  }
  if (!sharing) {
    links.shm = {nullptr, size == 1             ? "a group of one"
                          : group_shm == nullptr ? "the group it was split from has none"
                                                 : "no other member shares this host"};
  } else if (!first_failure.empty()) {
    if (options.shm.mode == TransportMode::Shm) {
      throw TransportError(TransportError::Kind::System,
                           "OCCL_TRANSPORT=shm, but shared memory failed on " + first_failure);
    }
    links.shm = {nullptr, "no shared memory: " + first_failure};
  } else {
    auto shm = std::make_unique<ShmLinks>(me, size, local, region.mapping.base,
                                          region.mapping.bytes, options.shm.ring_bytes);
    region.mapping = {};  // the links own it now
    std::string single_copies_off;
    if (local.size() != static_cast<size_t>(size)) {
      std::vector<int> remote;
      for (int i = 0; i < size; ++i) {
        if (std::find(local.begin(), local.end(), i) == local.end()) remote.push_back(i);
      }
      single_copies_off = "member(s) " + list(remote) + " run on another host";
    } else if (!group.peer_memory()) {
      single_copies_off = "the group it was split from has none";
    } else {
      std::vector<pid_t> pids;
      for (const MemberRecord& record : records) pids.push_back(record.pid);
      shm->enable_peer_memory(std::move(pids));
    }
    links.shm = {std::move(shm), single_copies_off};
  }

  links.shm.hosts = member_hosts(group.hosts(), members);
  links.collective = join_members(collective_listener, mine.collective_nonce, me, records,
                                  &MemberRecord::collective_port, &MemberRecord::collective_nonce,
                                  deadline);
  links.p2p = join_members(p2p_listener, mine.p2p_nonce, me, records, &MemberRecord::p2p_port,
                           &MemberRecord::p2p_nonce, deadline);
  if (options.loopback_send_buffer_bytes > 0) {
    for (auto* set : {&links.collective, &links.p2p}) {
      for (const Socket& link : *set) {
        if (link.valid() && link.loopback()) link.limit_send_buffer(options.loopback_send_buffer_bytes);
      }
    }
  }
  return links;
}

}  // namespace occl::transport
