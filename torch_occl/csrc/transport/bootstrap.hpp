// Connects the ranks of a group through the c10d::Store that torch.distributed hands the backend.
//
// The store carries each rank's listening address, a per-group random secret and what the
// shared-memory setup needs, nothing else. Rank r connects to every lower rank and accepts every
// higher one; a connection that does not present the group's secret and a plausible rank is
// dropped without disturbing the group.
//
// Generations: a store may outlive the ranks that used it (torch elastic keeps its TCPStore
// across restarts, under the same prefix), so its keys may hold what an earlier attempt left.
// Every bootstrap therefore keeps its keys under a generation that rank 0 starts afresh (a
// counter in the store) and points to from one key; the others follow the pointer. Rank 0
// removes the pointer as soon as every rank has connected to it, so a later attempt waits for its
// own rank 0 instead of following an old pointer. A pointer an interrupted attempt left behind
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

#include "socket.hpp"

#include <c10/util/intrusive_ptr.h>

#include <chrono>
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
  // Every step below must be done within `timeout` from now.
  Bootstrap(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
            std::chrono::milliseconds timeout);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // One connection to every other rank (links[rank] stays invalid). Every rank of the group must
  // call it with the same channels in the same order. The first call joins the generation; its
  // links then watch over every later wait (so they must outlive the Bootstrap's use).
  std::vector<Socket> connect_group(const LinkOptions& options);

  // This generation's key `name`: set, and wait for (until the deadline, or until a rank linked
  // already is gone).
  void set(const std::string& name, const std::string& value);
  std::string wait(const std::string& name);

 private:
  void join_generation();
  bool generation_moved_on();
  std::vector<Socket> connect_links(const LinkOptions& options);
  Socket connect_member(int peer, const LinkOptions& options);
  void accept_members(const Socket& listener, const LinkOptions& options,
                      std::vector<Socket>& links);
  void probe_unconnected(const LinkOptions& options, const std::vector<Socket>& links);
  void check_watched();
  void check_given_up();
  [[noreturn]] void give_up(const TransportError& error);
  [[noreturn]] void leave(const TransportError& error);

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int size_;
  Deadline deadline_;
  std::string generation_;       // empty until joined
  std::string prefix_;           // "occl/<generation>/"
  bool joining_ = true;          // until the first links are up: an old generation may lurk
  std::vector<uint8_t> secret_;  // of this generation
  std::vector<std::pair<int, int>> watched_;  // (rank, fd) of the first links
};

}  // namespace occl::transport
