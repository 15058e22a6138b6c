#include "p2p.hpp"

#include "peer_buffer.hpp"

#include <c10/util/Logging.h>

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <string>

namespace occl::transport {
namespace {

constexpr uint32_t kP2PMagic = 0x4f435032;  // "OCP2"
constexpr int kMaxPollMillis = 1000;
// How long a large message nobody receives yet waits (lent: in its sender's memory; sent: in the
// socket) before the receiver buffers it anyway: long enough for a receive posted right after,
// short enough that a send completes without one, so ranks that both send first never deadlock.
constexpr auto kReceiveGrace = std::chrono::milliseconds(1);

// What a frame is (P2PHeader::kind).
enum FrameKind : uint32_t {
  kMessage = 0,  // tag, bytes, then the message's bytes
  kLent = 1,     // tag, bytes, then a LentMessage: the bytes stay in the sender's memory
  kCopied = 2,   // tag: a LentMessage's id; the receiver is done with it, the send completes
  kGaveUp = 3,   // bytes, then the text of the sender's report that it gave up on a collective
};
// A longer report is a bad frame: it is an error message, not data.
constexpr uint64_t kMaxReportBytes = 64 * 1024;

struct P2PHeader {
  uint32_t magic;
  uint32_t kind;
  int64_t tag;
  uint64_t bytes;  // the message's size, for kMessage and kLent
};

struct LentMessage {
  Region region;     // the message in the sender's memory
  uint64_t id;       // the sender's name for it, echoed by kCopied
  uint64_t revoked;  // address of the sender's Link::revoked for this link
};

struct SendRequest {
  P2PHeader header;
  const char* data;
  size_t done;  // bytes of header + payload written so far
  Deadline deadline;
  P2PEngine::Completion callback;  // for a kCopied reply: empty, or a receive waiting for it
  LentMessage lent{};              // the payload of a kLent frame
  std::shared_ptr<const std::string> report;  // the payload of a kGaveUp frame, kept alive

  const char* payload() const {
    return header.kind == kLent ? reinterpret_cast<const char*>(&lent) : data;
  }
  size_t payload_bytes() const {
    if (header.kind == kLent) return sizeof(LentMessage);
    return header.kind == kMessage || header.kind == kGaveUp ? header.bytes : 0;
  }
  size_t total() const { return sizeof(P2PHeader) + payload_bytes(); }
};

// A lent send whose receiver has not copied it yet.
struct LentSend {
  P2PEngine::Completion callback;
  Deadline deadline;
};

struct RecvRequest {
  int peer;  // or kAnySource
  int64_t tag;
  char* data;
  size_t bytes;
  Deadline deadline;
  P2PEngine::Completion callback;

  bool matches(int from, int64_t message_tag) const {
    return (peer == P2PEngine::kAnySource || peer == from) && tag == message_tag;
  }
};

// The bytes of a message nobody waits for yet. Not zeroed first: the payload overwrites them,
// and zeroing a large buffer would cost as much as receiving it.
struct Payload {
  std::unique_ptr<char[]> data;
  size_t size = 0;

  static Payload of(size_t bytes) { return {std::unique_ptr<char[]>(new char[bytes]), bytes}; }
};

// A lent message nobody has received yet.
struct LentArrival {
  Region region;
  uint64_t id;
  uint64_t revoked;  // where the sender says it let the message go
  Deadline buffer_at;  // when the receiver copies it into a Payload after all
};

struct Arrived {
  int64_t tag;
  Payload payload;
  std::optional<LentArrival> lent;  // set while the bytes are still in the sender's memory
};

std::exception_ptr error(TransportError::Kind kind, const std::string& what) {
  return std::make_exception_ptr(TransportError(kind, what));
}

std::exception_ptr size_mismatch(int peer, int64_t tag, size_t expected, size_t got) {
  return error(TransportError::Kind::Protocol,
               "rank " + std::to_string(peer) + " sent " + std::to_string(got) +
                   " bytes with tag " + std::to_string(tag) + ", but the receive expects " +
                   std::to_string(expected));
}

// Receives bytes into `data`: how many, 0 when the socket has none now; throws when it closed.
size_t read_some(int fd, int peer, void* data, size_t bytes) {
  if (bytes == 0) return 0;
  ssize_t n = ::recv(fd, data, bytes, MSG_DONTWAIT);
  if (n > 0) return static_cast<size_t>(n);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  throw TransportError(TransportError::Kind::PeerClosed,
                       "rank " + std::to_string(peer) + " closed the connection" +
                           (n < 0 ? std::string(": ") + std::strerror(errno) : ""));
}

}  // namespace

// One peer's connection: the sends queued to it and the message arriving from it.
struct Link {
  Socket socket;
  std::string failure;  // set once the link is unusable; requests on it then fail with it
  std::deque<SendRequest> sends;

  P2PHeader header{};
  size_t header_done = 0;
  bool in_payload = false;
  std::optional<RecvRequest> matched;  // the receive the arriving payload goes into, or
  Payload buffer;                      // where it goes while nobody waits for it
  bool discard = false;                // a payload whose receive failed: read and drop it
  // A large payload nobody waits for is left in the socket until then, so that a receive posted
  // meanwhile takes it straight from the socket (through a buffer, it would be copied twice).
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
};

struct P2PEngine::State {
  int rank;
  int wake_fd;  // an eventfd: new requests, abort or stop
  std::optional<PeerMemory> peer_memory;  // set: large messages are lent
  size_t large_min_bytes = 0;
  std::vector<Link> links;
  std::list<RecvRequest> posted;  // receives waiting for a message, in posting order
  bool stopping = false;
  std::string abort_reason;
  P2PEngine::FailureHandler on_peer_failure;

  std::mutex inbox_mutex;
  std::vector<std::function<void(State&)>> inbox;
  // Completions that have run, destroyed by the next send()/recv() or by the engine's
  // destructor on the caller's thread, never here: they hold tensors, and dropping a tensor
  // Python also holds takes the GIL, which a thread cannot wait for while the interpreter exits.
  std::vector<Completion> finished;  // guarded by inbox_mutex

  void complete(Completion& callback, std::exception_ptr failure, int source);

  void fail_link(int peer, TransportError::Kind kind, const std::string& why);
  void fail_all(TransportError::Kind kind, const std::string& why);
  void add_send(int peer, SendRequest request);
  void add_recv(RecvRequest request);
  void progress_sends(int peer);
  void progress_recv(int peer);
  void start_message(int peer);
  void finish_message(int peer);
  void on_lent(int peer);
  void on_copied(int peer, uint64_t id);
  void receive_lent(int peer, int64_t tag, const LentArrival& lent, RecvRequest& recv);
  std::exception_ptr copy_lent(int peer, const LentArrival& lent, void* into);
  // Queues the answer that this rank is done with a lent message; `written` (if any) runs once
  // the kernel has it, or at once if the link failed.
  void send_copied(int peer, uint64_t id, Completion written = nullptr);
  void buffer_lent(Deadline now);
  void expire(Deadline now);
  Deadline next_deadline() const;
  bool every_link_failed() const;

  ~State() { ::close(wake_fd); }
};

// Calls a request's completion and keeps it for the caller's thread to drop. An exception from
// it (a bug in a callback) must not end the engine's thread, which serves every other request.
void P2PEngine::State::complete(Completion& callback, std::exception_ptr failure, int source) {
  if (!callback) return;  // a kCopied reply that no receive waits for
  try {
    callback(failure, source);
  } catch (const std::exception& e) {
    LOG(ERROR) << "occl: a point-to-point completion threw: " << e.what();
  } catch (...) {
    LOG(ERROR) << "occl: a point-to-point completion threw";
  }
  std::lock_guard<std::mutex> lock(inbox_mutex);
  finished.push_back(std::move(callback));
}

bool P2PEngine::State::every_link_failed() const {
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    if (peer != rank && links[peer].failure.empty()) return false;
  }
  return true;
}

void P2PEngine::State::fail_link(int peer, TransportError::Kind kind, const std::string& why) {
  Link& link = links[peer];
  if (!link.failure.empty()) return;
  link.failure = why;
  link.revoked->store(1);  // before the lent sends below fail and their buffers may be reused
  link.socket = Socket();
  for (auto& send : link.sends) complete(send.callback, error(kind, why), -1);
  link.sends.clear();
  for (auto& [id, send] : link.lent_out) complete(send.callback, error(kind, why), -1);
  link.lent_out.clear();
  // Lent messages not copied yet: their sender may free them from now on.
  for (auto it = link.arrived.begin(); it != link.arrived.end();) {
    it = it->lent ? link.arrived.erase(it) : std::next(it);
  }
  if (link.matched) complete(link.matched->callback, error(kind, why), peer);
  link.matched.reset();
  // So is the message that was arriving on it.
  link.in_payload = false;
  link.header_done = 0;
  link.buffer = {};
  link.buffer_at.reset();
  link.discard = false;
  // Receives from this peer fail now; receives from any source once no peer is left.
  bool none_left = every_link_failed();
  for (auto it = posted.begin(); it != posted.end();) {
    if (it->peer == peer || none_left) {
      complete(it->callback, error(kind, why), it->peer);
      it = posted.erase(it);
    } else {
      ++it;
    }
  }
}

void P2PEngine::State::fail_all(TransportError::Kind kind, const std::string& why) {
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    if (peer != rank) fail_link(peer, kind, why);
  }
  for (auto& recv : posted) complete(recv.callback, error(kind, why), recv.peer);
  posted.clear();
}

void P2PEngine::State::add_send(int peer, SendRequest request) {
  Link& link = links[peer];
  if (!link.failure.empty()) {
    complete(request.callback, error(TransportError::Kind::PeerClosed, link.failure), -1);
    return;
  }
  if (peer_memory && request.header.bytes > 0 && request.header.bytes >= large_min_bytes) {
    request.header.kind = kLent;
    request.lent = {region_of(request.data, request.header.bytes), link.next_lent_id++,
                    reinterpret_cast<uint64_t>(link.revoked.get())};
  }
  link.sends.push_back(std::move(request));
}

void P2PEngine::State::add_recv(RecvRequest request) {
  // A message that already arrived matches first: earliest from one sender, in rank order across
  // senders for a receive from any source.
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    if (peer == rank || (request.peer != kAnySource && request.peer != peer)) continue;
    auto& arrived = links[peer].arrived;
    for (auto it = arrived.begin(); it != arrived.end(); ++it) {
      if (!request.matches(peer, it->tag)) continue;
      if (it->lent) {
        const LentArrival lent = *it->lent;
        const int64_t tag = it->tag;
        arrived.erase(it);
        receive_lent(peer, tag, lent, request);
        return;
      }
      if (it->payload.size != request.bytes) {
        complete(request.callback,
                 size_mismatch(peer, it->tag, request.bytes, it->payload.size), peer);
      } else {
        std::memcpy(request.data, it->payload.data.get(), request.bytes);
        complete(request.callback, nullptr, peer);
      }
      arrived.erase(it);
      return;
    }
  }
  // A message still arriving (or left in the socket) that nobody waited for: what has arrived is
  // copied, the rest goes straight into the receive's memory.
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    if (peer == rank || (request.peer != kAnySource && request.peer != peer)) continue;
    Link& link = links[peer];
    if (!link.failure.empty() || !link.in_payload || link.header.kind != kMessage ||
        link.matched || link.discard || !request.matches(peer, link.header.tag)) {
      continue;
    }
    if (link.header.bytes != request.bytes) {
      // Fails the receive and takes the message, as when the receive comes first.
      complete(request.callback,
               size_mismatch(peer, link.header.tag, request.bytes, link.header.bytes), peer);
      link.discard = true;
      if (link.buffer_at) {
        link.buffer_at.reset();
        link.buffer = Payload::of(link.header.bytes);
      }
      return;
    }
    if (link.payload_done > 0) {
      std::memcpy(request.data, link.buffer.data.get(), link.payload_done);
    }
    link.buffer = {};
    link.buffer_at.reset();
    link.matched = std::move(request);
    return;
  }
  if (request.peer != kAnySource && !links[request.peer].failure.empty()) {
    complete(request.callback,
             error(TransportError::Kind::PeerClosed, links[request.peer].failure), request.peer);
    return;
  }
  if (request.peer == kAnySource && links.size() > 1 && every_link_failed()) {
    complete(request.callback,
             error(TransportError::Kind::PeerClosed, "every other rank closed its connection"),
             request.peer);
    return;
  }
  posted.push_back(std::move(request));
}

void P2PEngine::State::progress_sends(int peer) {
  Link& link = links[peer];
  while (!link.sends.empty()) {
    SendRequest& send = link.sends.front();
    iovec iov[2];
    int count = 0;
    size_t payload_offset = 0;
    if (send.done < sizeof(P2PHeader)) {
      iov[count++] = {reinterpret_cast<char*>(&send.header) + send.done,
                      sizeof(P2PHeader) - send.done};
    } else {
      payload_offset = send.done - sizeof(P2PHeader);
    }
    if (send.payload_bytes() > payload_offset) {
      iov[count++] = {const_cast<char*>(send.payload()) + payload_offset,
                      send.payload_bytes() - payload_offset};
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    ssize_t n = ::sendmsg(link.socket.fd(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      const std::string why =
          "rank " + std::to_string(peer) + " closed the connection: " + std::strerror(errno);
      // What the peer sent before it closed still counts: an answer that completes a lent send
      // may be waiting in the socket.
      try {
        progress_recv(peer);
      } catch (const std::exception&) {
      }
      fail_link(peer, TransportError::Kind::PeerClosed, why);
      return;
    }
    send.done += static_cast<size_t>(n);
    if (send.done < send.total()) return;
    Completion callback = std::move(send.callback);
    if (send.header.kind == kLent) {  // completes when the receiver has copied it
      link.lent_out[send.lent.id] = {std::move(callback), send.deadline};
      link.sends.pop_front();
      continue;
    }
    link.sends.pop_front();
    complete(callback, nullptr, -1);
  }
}

void P2PEngine::State::progress_recv(int peer) {
  Link& link = links[peer];
  for (;;) {
    if (!link.in_payload) {
      size_t n = read_some(link.socket.fd(), peer, reinterpret_cast<char*>(&link.header) +
                                                       link.header_done,
                           sizeof(P2PHeader) - link.header_done);
      if (n == 0) return;
      link.header_done += n;
      if (link.header_done < sizeof(P2PHeader)) continue;
      if (link.header.magic != kP2PMagic || link.header.kind > kGaveUp ||
          (link.header.kind == kGaveUp && link.header.bytes > kMaxReportBytes)) {
        throw TransportError(TransportError::Kind::Protocol,
                             "bad frame from rank " + std::to_string(peer));
      }
      if (link.header.kind == kCopied) {
        link.header_done = 0;
        on_copied(peer, static_cast<uint64_t>(link.header.tag));
        continue;
      }
      link.in_payload = true;
      link.payload_done = 0;
      link.discard = false;
      if (link.header.kind == kMessage) start_message(peer);
      if (link.header.kind == kGaveUp) link.buffer = Payload::of(link.header.bytes);
    }
    if (link.buffer_at) {
      if (Clock::now() < *link.buffer_at) return;
      link.buffer_at.reset();
      link.buffer = Payload::of(link.header.bytes);
    }
    if (link.header.kind == kLent) {
      size_t left = sizeof(LentMessage) - link.payload_done;
      size_t n = read_some(link.socket.fd(), peer,
                           reinterpret_cast<char*>(&link.lent_in) + link.payload_done, left);
      if (n == 0) return;
      link.payload_done += n;
      if (n < left) continue;
      link.in_payload = false;
      link.header_done = 0;
      on_lent(peer);
      continue;
    }
    char* target = link.matched ? link.matched->data : link.buffer.data.get();
    size_t left = link.header.bytes - link.payload_done;
    if (left > 0) {
      size_t n = read_some(link.socket.fd(), peer, target + link.payload_done, left);
      if (n == 0) return;
      link.payload_done += n;
      if (n < left) continue;
    }
    finish_message(peer);
  }
}

void P2PEngine::State::start_message(int peer) {
  Link& link = links[peer];
  for (auto it = posted.begin(); it != posted.end(); ++it) {
    if (!it->matches(peer, link.header.tag)) continue;
    if (it->bytes == link.header.bytes) {
      link.matched = std::move(*it);
    } else {
      complete(it->callback, size_mismatch(peer, link.header.tag, it->bytes, link.header.bytes),
               peer);
      link.discard = true;
    }
    posted.erase(it);
    break;
  }
  if (link.matched) return;
  // Not when whole messages already wait for their receives: this one would wait behind them.
  if (!link.discard && link.header.bytes > 0 && link.header.bytes >= large_min_bytes &&
      link.arrived.empty()) {
    link.buffer_at = Clock::now() + kReceiveGrace;
  } else {
    link.buffer = Payload::of(link.header.bytes);
  }
}

void P2PEngine::State::on_lent(int peer) {
  Link& link = links[peer];
  const int64_t tag = link.header.tag;
  if (!peer_memory) {
    throw TransportError(TransportError::Kind::Protocol,
                         "rank " + std::to_string(peer) + " lent a message to a rank that cannot "
                         "read its memory");
  }
  const LentArrival lent{link.lent_in.region, link.lent_in.id, link.lent_in.revoked,
                         Clock::now() + kReceiveGrace};
  for (auto it = posted.begin(); it != posted.end(); ++it) {
    if (!it->matches(peer, tag)) continue;
    RecvRequest recv = std::move(*it);
    posted.erase(it);
    receive_lent(peer, tag, lent, recv);
    return;
  }
  link.arrived.push_back({tag, Payload{}, lent});
}

void P2PEngine::State::receive_lent(int peer, int64_t tag, const LentArrival& lent,
                                    RecvRequest& recv) {
  std::exception_ptr failure = recv.bytes == lent.region.bytes
                                   ? copy_lent(peer, lent, recv.data)
                                   : size_mismatch(peer, tag, recv.bytes, lent.region.bytes);
  // Done with the sender's buffer either way. The receive completes once the kernel has that
  // answer: a receiver that exits right after its receive must not take the answer with it,
  // or the send fails although its message arrived.
  send_copied(peer, lent.id,
              [done = std::move(recv.callback), failure, peer](std::exception_ptr, int) mutable {
                done(failure, peer);
              });
}

std::exception_ptr P2PEngine::State::copy_lent(int peer, const LentArrival& lent, void* into) {
  try {
    PeerBuffer(&*peer_memory, peer, lent.region).read(0, into, lent.region.bytes);
  } catch (const TransportError&) {
    return std::current_exception();
  }
  // A sender lets a lent message go only after it set its link's revoked word: read after the
  // copy, a word still clear means the bytes copied were the message's. (A copy through a
  // mapping is plain loads: the fence keeps them before the word's.)
  std::atomic_thread_fence(std::memory_order_acquire);
  uint64_t revoked = 1;
  try {
    peer_memory->read(peer, lent.revoked, &revoked, sizeof(revoked));
  } catch (const TransportError&) {
    return std::current_exception();
  }
  if (revoked != 0) {
    return error(TransportError::Kind::PeerClosed,
                 "rank " + std::to_string(peer) +
                     " closed the connection while its message was being copied");
  }
  return nullptr;
}

void P2PEngine::State::send_copied(int peer, uint64_t id, Completion written) {
  Link& link = links[peer];
  if (!link.failure.empty()) {
    complete(written, nullptr, -1);
    return;
  }
  // Ahead of the messages queued to the peer (behind one half on the wire): the answer frees
  // the sender's buffer and ends its send, and must not wait until the peer receives them.
  auto at = link.sends.begin();
  if (at != link.sends.end() && at->done > 0) ++at;
  link.sends.insert(at, SendRequest{{kP2PMagic, kCopied, static_cast<int64_t>(id), 0}, nullptr,
                                    0, Deadline::max(), std::move(written)});
}

void P2PEngine::State::on_copied(int peer, uint64_t id) {
  Link& link = links[peer];
  auto it = link.lent_out.find(id);
  if (it == link.lent_out.end()) {
    throw TransportError(TransportError::Kind::Protocol,
                         "rank " + std::to_string(peer) + " copied a message never lent to it");
  }
  Completion callback = std::move(it->second.callback);
  link.lent_out.erase(it);
  complete(callback, nullptr, -1);
}

// Lent messages nobody received within kReceiveGrace are copied into buffers, which completes
// their sends: a rank may send before the rank it sends to posts the receive (and both may).
void P2PEngine::State::buffer_lent(Deadline now) {
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    Link& link = links[peer];
    for (auto it = link.arrived.begin(); it != link.arrived.end() && link.failure.empty();) {
      if (!it->lent || it->lent->buffer_at > now) {
        ++it;
        continue;
      }
      const LentArrival lent = *it->lent;
      std::exception_ptr failure;
      try {
        it->payload = Payload::of(lent.region.bytes);
        failure = copy_lent(peer, lent, it->payload.data.get());
      } catch (const std::exception&) {  // no memory for the buffer
        failure = std::current_exception();
      }
      if (failure) {
        // The message is lost: its sender and its receive must hear of it, through the link.
        try {
          std::rethrow_exception(failure);
        } catch (const TransportError& e) {
          fail_link(peer, e.kind(), e.what());
        } catch (const std::exception& e) {
          fail_link(peer, TransportError::Kind::System, e.what());
        }
        break;
      }
      send_copied(peer, lent.id);
      it->lent.reset();
      ++it;
    }
  }
}

void P2PEngine::State::finish_message(int peer) {
  Link& link = links[peer];
  link.in_payload = false;
  link.header_done = 0;
  if (link.header.kind == kGaveUp) {
    std::string report(link.buffer.data.get(), link.buffer.size);
    link.buffer = {};
    if (on_peer_failure) on_peer_failure(peer, report);
    return;
  }
  if (link.matched) {
    Completion callback = std::move(link.matched->callback);
    link.matched.reset();
    complete(callback, nullptr, peer);
    return;
  }
  Payload payload = std::move(link.buffer);
  link.buffer = {};
  if (link.discard) return;
  // A receive may have been posted while the payload was arriving.
  RecvRequest late{};
  bool found = false;
  for (auto it = posted.begin(); it != posted.end(); ++it) {
    if (it->matches(peer, link.header.tag)) {
      late = std::move(*it);
      posted.erase(it);
      found = true;
      break;
    }
  }
  if (!found) {
    link.arrived.push_back({link.header.tag, std::move(payload)});
    return;
  }
  if (late.bytes != payload.size) {
    complete(late.callback, size_mismatch(peer, link.header.tag, late.bytes, payload.size),
             peer);
    return;
  }
  std::memcpy(late.data, payload.data.get(), payload.size);
  complete(late.callback, nullptr, peer);
}

void P2PEngine::State::expire(Deadline now) {
  for (auto it = posted.begin(); it != posted.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    std::string from = it->peer == kAnySource ? "any rank" : "rank " + std::to_string(it->peer);
    complete(it->callback,
             error(TransportError::Kind::Timeout,
                   "no message with tag " + std::to_string(it->tag) + " arrived from " + from),
             it->peer);
    it = posted.erase(it);
  }
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    Link& link = links[peer];
    if (link.matched && link.matched->deadline <= now) {
      // The rest of the payload still arrives; read it into the buffer and drop it.
      complete(link.matched->callback,
               error(TransportError::Kind::Timeout,
                     "rank " + std::to_string(peer) + " had sent only " +
                         std::to_string(link.payload_done) + " of " +
                         std::to_string(link.header.bytes) + " bytes"),
               peer);
      link.matched.reset();
      link.buffer = Payload::of(link.header.bytes);
      link.discard = true;
    }
    const bool lent_overdue =
        std::any_of(link.lent_out.begin(), link.lent_out.end(),
                    [&](const auto& lent) { return lent.second.deadline <= now; });
    if (lent_overdue) {
      // Its receiver may be copying it right now: only closing the link makes sure it will not.
      fail_link(peer, TransportError::Kind::Timeout,
                "rank " + std::to_string(peer) + " did not copy a lent message in time");
    }
    if (link.sends.empty()) continue;
    if (link.sends.front().done > 0 && link.sends.front().deadline <= now) {
      // Half a message is on the wire: the link cannot carry another one.
      fail_link(peer, TransportError::Kind::Timeout,
                "rank " + std::to_string(peer) + " did not take a message in time");
      continue;
    }
    for (auto it = link.sends.begin(); it != link.sends.end();) {
      if (it->done == 0 && it->deadline <= now) {
        complete(it->callback,
                 error(TransportError::Kind::Timeout,
                       "rank " + std::to_string(peer) + " did not receive in time"),
                 -1);
        it = link.sends.erase(it);
      } else {
        ++it;
      }
    }
  }
}

Deadline P2PEngine::State::next_deadline() const {
  Deadline next = Deadline::max();
  for (const auto& recv : posted) next = std::min(next, recv.deadline);
  for (const auto& link : links) {
    if (link.matched) next = std::min(next, link.matched->deadline);
    if (link.buffer_at) next = std::min(next, *link.buffer_at);
    for (const auto& send : link.sends) next = std::min(next, send.deadline);
    for (const auto& [id, send] : link.lent_out) next = std::min(next, send.deadline);
    for (const auto& arrived : link.arrived) {
      if (arrived.lent) next = std::min(next, arrived.lent->buffer_at);
    }
  }
  return next;
}

P2PEngine::P2PEngine(int rank, int size, std::vector<Socket> links,
                     std::optional<PeerMemory> peer_memory, size_t large_min_bytes,
                     FailureHandler on_peer_failure)
    : state_(std::make_shared<State>()) {
  state_->on_peer_failure = std::move(on_peer_failure);
  state_->peer_memory = std::move(peer_memory);
  state_->large_min_bytes = large_min_bytes;
  state_->rank = rank;
  state_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (state_->wake_fd < 0) {
    throw TransportError(TransportError::Kind::System,
                         std::string("eventfd: ") + std::strerror(errno));
  }
  state_->links.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) state_->links[r].socket = std::move(links[r]);
  thread_ = std::thread(loop, state_);
}

P2PEngine::~P2PEngine() {
  // The thread fails what is pending and ends on its own. Not joined: dropping the tensors of
  // those requests may wait for the GIL, which the thread destroying the engine may hold.
  post([](State& state) { state.stopping = true; });
  thread_.detach();
}

void P2PEngine::post(std::function<void(State&)> request) {
  std::vector<Completion> finished;  // destroyed here, on the caller's thread, after the lock
  {
    std::lock_guard<std::mutex> lock(state_->inbox_mutex);
    state_->inbox.push_back(std::move(request));
    finished.swap(state_->finished);
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(state_->wake_fd, &one, sizeof(one));
}

void P2PEngine::send(int peer, int64_t tag, const void* data, size_t bytes, Deadline deadline,
                     Completion done) {
  SendRequest request{{kP2PMagic, 0, tag, bytes}, static_cast<const char*>(data), 0, deadline,
                      std::move(done)};
  post([peer, request = std::move(request)](State& state) mutable {
    state.add_send(peer, std::move(request));
  });
}

void P2PEngine::recv(int peer, int64_t tag, void* data, size_t bytes, Deadline deadline,
                     Completion done) {
  RecvRequest request{peer, tag, static_cast<char*>(data), bytes, deadline, std::move(done)};
  post([request = std::move(request)](State& state) mutable {
    state.add_recv(std::move(request));
  });
}

void P2PEngine::announce_failure(const std::string& report, Deadline flush_by) {
  struct Flushed {
    std::mutex mutex;
    std::condition_variable done;
    size_t pending = 0;
    bool posted = false;
  };
  auto flushed = std::make_shared<Flushed>();
  auto text = std::make_shared<const std::string>(report.substr(0, kMaxReportBytes));
  post([flushed, text](State& state) {
    std::lock_guard<std::mutex> lock(flushed->mutex);
    for (int peer = 0; peer < static_cast<int>(state.links.size()); ++peer) {
      Link& link = state.links[peer];
      if (peer == state.rank || !link.failure.empty()) continue;
      ++flushed->pending;
      SendRequest request{{kP2PMagic, kGaveUp, 0, text->size()}, text->data(), 0,
                          Deadline::max(), [flushed](std::exception_ptr, int) {
                            std::lock_guard<std::mutex> lock(flushed->mutex);
                            --flushed->pending;
                            flushed->done.notify_all();
                          }};
      request.report = text;
      link.sends.push_back(std::move(request));
    }
    flushed->posted = true;
    flushed->done.notify_all();
  });
  std::unique_lock<std::mutex> lock(flushed->mutex);
  flushed->done.wait_until(lock, flush_by, [&] { return flushed->posted && flushed->pending == 0; });
}

void P2PEngine::abort() {
  post([](State& state) { state.abort_reason = "the communicator was aborted"; });
}

void P2PEngine::loop(std::shared_ptr<State> shared) {
  ::pthread_setname_np(::pthread_self(), "occl-p2p");  // for top -H, gdb and /proc
  State& state = *shared;
  std::vector<pollfd> fds;
  std::vector<int> fd_peers;  // the rank of fds[i + 1]
  for (;;) {
    std::vector<std::function<void(State&)>> requests;
    {
      std::lock_guard<std::mutex> lock(state.inbox_mutex);
      requests.swap(state.inbox);
    }
    for (auto& request : requests) request(state);
    if (!state.abort_reason.empty()) {
      state.fail_all(TransportError::Kind::Aborted, state.abort_reason);
    }
    if (state.stopping) {
      state.fail_all(TransportError::Kind::Aborted, "the backend was shut down");
      return;
    }

    for (int peer = 0; peer < static_cast<int>(state.links.size()); ++peer) {
      if (!state.links[peer].socket.valid()) continue;
      try {
        state.progress_sends(peer);
        if (state.links[peer].socket.valid()) state.progress_recv(peer);
      } catch (const TransportError& e) {
        state.fail_link(peer, e.kind(), e.what());
      } catch (const std::exception& e) {  // e.g. no memory for a huge unexpected message
        state.fail_link(peer, TransportError::Kind::System, e.what());
      }
    }
    state.buffer_lent(Clock::now());
    state.expire(Clock::now());

    fds.clear();
    fd_peers.clear();
    fds.push_back({state.wake_fd, POLLIN, 0});
    for (int peer = 0; peer < static_cast<int>(state.links.size()); ++peer) {
      const Link& link = state.links[peer];
      if (!link.socket.valid()) continue;
      short events = link.buffer_at ? 0 : POLLIN;  // a payload left in the socket waits
      if (!link.sends.empty()) events |= POLLOUT;
      fds.push_back({link.socket.fd(), events, 0});
      fd_peers.push_back(peer);
    }
    Deadline next = state.next_deadline();
    int timeout = next == Deadline::max() ? kMaxPollMillis
                                          : std::min(millis_until(next) + 1, kMaxPollMillis);
    if (::poll(fds.data(), fds.size(), timeout) > 0 && (fds[0].revents & POLLIN)) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(state.wake_fd, &count, sizeof(count));
    }
    // A payload held in a broken connection is read at once, to meet the connection's end.
    for (size_t i = 1; i < fds.size(); ++i) {
      Link& link = state.links[fd_peers[i - 1]];
      if ((fds[i].revents & (POLLERR | POLLHUP)) && link.buffer_at) link.buffer_at = Clock::now();
    }
  }
}

}  // namespace occl::transport
