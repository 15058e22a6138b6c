// One peer's link as the p2p engine sees it: the frames queued to the peer and the state of the
// frame arriving from it. Its bytes travel through the p2p lane's shared-memory rings when the
// peer is on this host, else through the socket; the socket then only carries pokes (a byte
// that wakes a sleeping engine thread) and tells whether the peer lives.
#pragma once

#include "../channel.hpp"
#include "../socket.hpp"
#include "requests.hpp"

#include <optional>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

namespace occl::transport::p2p {

struct Link {
  Socket socket;
  ByteRing* out = nullptr;  // the p2p lane's rings, when the peer is on this host
  ByteRing* in = nullptr;
  std::string failure;  // set once the link is unusable; requests on it then fail with it
  std::deque<SendRequest> sends;
  bool poked_full = false;  // the peer was poked because this side's ring to it is full

  Header header{};
  size_t header_done = 0;
  bool in_payload = false;
  std::optional<RecvRequest> matched;  // the receive the arriving payload goes into, or
  Payload buffer;                      // where it goes while nobody waits for it
  bool discard = false;                // a payload whose receive failed: read and drop it
  // A large payload nobody waits for is left in the socket (or ring) until then, so that a
  // receive posted meanwhile takes it straight from there (through a buffer, it would be copied
  // twice).
  std::optional<Deadline> buffer_at;
  size_t payload_done = 0;             // of the payload, or of the LentMessage of a kLent frame
  LentMessage lent_in{};
  std::deque<Arrived> arrived;         // whole messages nobody has received yet
  std::map<uint64_t, LentSend> lent_out;  // by id
  uint64_t next_lent_id = 0;
  // Set, before any lent send fails, when the link fails: the receiver reads it (in this
  // process's memory) after each copy, so it never keeps bytes of a buffer this rank let go.
  // Its own allocation: its address must not move.
  std::unique_ptr<std::atomic<uint64_t>> revoked = std::make_unique<std::atomic<uint64_t>>(0);

  bool alive() const { return failure.empty() && socket.valid(); }
  bool shared() const { return out != nullptr; }
  Channel channel(int peer) const { return {peer, socket.fd(), out, in}; }
};

}  // namespace occl::transport::p2p
