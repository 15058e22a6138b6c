// Connects the ranks of a group through the c10d::Store that torch.distributed hands the backend.
//
// The store carries each rank's listening address with its pid and a nonce, a random secret per
// generation and what the shared-memory setup needs; never the key. Rank r connects to every
// lower rank and accepts every higher one with the handshake of handshake.hpp; a connection that
// does not present the group's secret and a plausible rank is dropped without disturbing the
// group.
//
// Impostors: anyone who reads the store can present the secret. Without a key, such a process
// cannot be told from the rank it claims to be, so nobody may be locked out silently: an acceptor
// that a rank joins twice, or whose connection does not match what its rank published, fails
// formation naming the rank; a rank refused because its place was taken (each acceptor records
// whom it accepted) says so. Either records why in the store, so every member fails. With a key
// (auth.hpp), a process that cannot prove it holds the key is refused and the group forms.
//
// Generations: a store may outlive the ranks that used it (torch elastic keeps its TCPStore
// across restarts, under the same prefix), so its keys may hold what an earlier attempt left.
// Every bootstrap therefore keeps its keys under a generation that rank 0 starts afresh (a
// counter in the store) and points to from one key; the others follow the pointer. Rank 0
// removes the pointer once the group has formed, so a later attempt waits for its own rank 0
// instead of following an old pointer. A pointer an interrupted attempt left behind
// leads to addresses nobody listens on: a rank refused there waits briefly for the pointer to
// change and then starts over with the new generation.
//
// Ranks that die: a connection refused at an address its rank published means that rank is gone
// (a rank listens from before it publishes until every higher rank has connected to it); a rank
// waiting for higher ranks to connect probes their published addresses now and then; and once a
// first set of links exists, every later wait ends as soon as one of them closes. A rank that
// finds another gone says so in the store ("gave-up"), which the others read whenever they find
// something amiss or wait long, so all of them name the rank that is gone. Survivors fail within
// a few seconds (2 s of them the grace above), instead of waiting out the timeout.
#pragma once

#include "auth.hpp"
#include "handshake.hpp"
#include "socket.hpp"

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace c10d {
class Store;
}

namespace occl::transport {

struct LinkOptions {
  std::string bind_address;               // where this rank listens
  std::string channel;                    // names this set of links' keys ("collective", "p2p")
  size_t loopback_send_buffer_bytes = 0;  // SO_SNDBUF of links within this host (0: the kernel's)
};

class Bootstrap {
 public:
  // Every step below must be done within `timeout` from now. Reads the key (auth.hpp), if any.
  Bootstrap(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
            std::chrono::milliseconds timeout);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // One connection to every other rank (links[rank] stays invalid). Every rank of the group must
  // call it with the same channels in the same order. The first call joins the generation; its
  // links then watch over every later wait (so they must outlive the Bootstrap's use).
  std::vector<Socket> connect_group(const LinkOptions& options);

  // The pid each rank stated in the handshakes of its links (this rank's own entry 0): as its
  // Hello said and its entry in the store announced, for ranks that connected to this one; as
  // its entry announced, for those this rank connected to (their proof covers the entry when
  // the group holds a key). Set by the first connect_group.
  const std::vector<uint32_t>& proven_pids() const { return proven_pids_; }
  Deadline deadline() const { return deadline_; }
  // Waits until `socket` (a link this bootstrap formed) has bytes to read, as wait() waits for
  // a key: throws when the deadline passes, a linked rank is gone, or one gave up and said why.
  void wait_readable(const Socket& socket);

  // Once every set of links is up (every rank of the group must call it).
  void finish();

  // This generation's key `name`: set, and wait for (until the deadline, or until a rank linked
  // already is gone).
  void set(const std::string& name, const std::string& value);
  std::string wait(const std::string& name);

 private:
  void join_generation();
  bool generation_moved_on();
  std::vector<Socket> connect_links(const LinkOptions& options);
  Socket connect_member(int peer, const LinkOptions& options);
  struct Attempt {
    Socket socket;                   // valid once accepted
    std::optional<Verdict> refused;  // refused, for the reason the answer gives
    std::string failure;             // else what went wrong
    bool crowded_out = false;        // closed before its Challenge came
  };
  Attempt handshake_with(int peer, const std::string& channel, const std::string& published,
                         const Hello& hello);
  void check_taken(int peer, const std::string& channel, const Hello& hello);
  struct Candidate;
  void accept_members(const Socket& listener, const std::string& own_record,
                      const LinkOptions& options, std::vector<Socket>& links);
  Verdict judge(const Candidate& candidate, const std::string& own_record,
                const std::string& channel, const std::vector<Socket>& links);
  void probe_unconnected(const LinkOptions& options, const std::vector<Socket>& links);
  void check_watched();
  void check_given_up();
  // Whether the rank an error names answered with this generation's secret: then this rank did
  // not follow an old pointer, and leaves without the grace for that.
  enum class Evidence { MaybeStale, ThisGeneration };
  [[noreturn]] void give_up(const TransportError& error,
                            Evidence evidence = Evidence::MaybeStale);
  [[noreturn]] void leave(const TransportError& error, Evidence evidence = Evidence::MaybeStale);

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int size_;
  Deadline deadline_;
  std::string generation_;       // empty until joined
  std::string prefix_;           // "occl/<generation>/"
  bool joining_ = true;          // until the first links are up: an old generation may lurk
  std::optional<AuthKey> key_;
  const AuthKey* auth_key() const { return key_ ? &*key_ : nullptr; }
  Nonce secret_{};      // of this generation
  Nonce member_nonce_;  // published with this rank's addresses: the hello of this process
  std::vector<std::pair<int, int>> watched_;  // (rank, fd) of the first links
  std::vector<uint32_t> proven_pids_;
};

}  // namespace occl::transport
