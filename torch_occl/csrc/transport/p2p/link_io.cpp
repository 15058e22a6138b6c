// Frames through a link's channel: the sends queued to a peer, the frame arriving from it, and
// the pokes that wake a peer's sleeping engine thread when the frames travel through rings.
#include "state.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

namespace occl::transport::p2p {

void State::progress(int peer) {
  try {
    progress_sends(peer);
    if (links[peer].alive()) progress_recv(peer);
  } catch (const TransportError& e) {
    fail_link(peer, e.kind(), e.what());
  } catch (const std::exception& e) {  // e.g. no memory for a huge unexpected message
    fail_link(peer, TransportError::Kind::System, e.what());
  }
}

void State::progress_sends(int peer) {
  Link& link = links[peer];
  while (!link.sends.empty()) {
    SendRequest& send = link.sends.front();
    iovec iov[2];
    int count = 0;
    size_t payload_offset = 0;
    if (send.done < sizeof(Header)) {
      iov[count++] = {reinterpret_cast<char*>(&send.header) + send.done,
                      sizeof(Header) - send.done};
    } else {
      payload_offset = send.done - sizeof(Header);
    }
    if (send.payload_bytes() > payload_offset) {
      iov[count++] = {const_cast<char*>(send.payload()) + payload_offset,
                      send.payload_bytes() - payload_offset};
    }
    size_t n = 0;
    try {
      n = link.channel(peer).write(iov, count);
    } catch (const TransportError& e) {
      // What the peer sent before it closed still counts: an answer that completes a lent send
      // may be waiting in the socket.
      try {
        progress_recv(peer);
      } catch (const std::exception&) {
      }
      fail_link(peer, e.kind(), e.what());
      return;
    }
    send.done += n;
    bytes_moved += n;
    if (link.shared()) {
      // The peer is poked when it asked, or when it must read although it may not wait for
      // anything: a full ring (its reader frees it, or the sends behind stall), a lent message
      // (its receiver buffers it after kReceiveGrace) or a failure report.
      const bool whole = send.done == send.total();
      const bool full = !whole && n < Channel::kPassBytes;
      bool must = full && !link.poked_full;
      must |= whole && (send.header.kind == kLent || send.header.kind == kGaveUp);
      link.poked_full = full;
      if ((n > 0 && link.out->take_poke(ByteRing::Side::Consumer)) || must) poke(peer);
    }
    if (send.done < send.total()) {
      if (n > 0 && link.shared()) continue;  // a ring takes at most a pass's bytes per call
      return;
    }
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

void State::progress_recv(int peer) {
  Link& link = links[peer];
  auto read = [&](void* data, size_t bytes) -> size_t {
    if (bytes == 0) return 0;
    iovec iov{data, bytes};
    size_t n = link.channel(peer).read(&iov, 1);
    bytes_moved += n;
    if (n > 0 && link.shared() && link.in->take_poke(ByteRing::Side::Producer)) poke(peer);
    return n;
  };
  for (;;) {
    if (!link.in_payload) {
      size_t n = read(reinterpret_cast<char*>(&link.header) + link.header_done,
                      sizeof(Header) - link.header_done);
      if (n == 0) return;
      link.header_done += n;
      if (link.header_done < sizeof(Header)) continue;
      if (!link.header.valid()) {
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
      size_t n = read(reinterpret_cast<char*>(&link.lent_in) + link.payload_done, left);
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
      size_t n = read(target + link.payload_done, left);
      if (n == 0) return;
      link.payload_done += n;
      if (n < left) continue;
    }
    finish_message(peer);
  }
}

void State::drain_pokes(int peer) {
  char bytes[64];
  for (;;) {
    ssize_t n = ::recv(links[peer].socket.fd(), bytes, sizeof(bytes), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) throw_closed(peer);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    if (errno == ECONNRESET) throw_closed(peer);
    throw_io(peer, "receiving from", errno);
  }
}

void State::poke(int peer) {
  // Best effort: a full socket holds pokes enough, and a closed one fails the link elsewhere.
  const char byte = 1;
  [[maybe_unused]] ssize_t n =
      ::send(links[peer].socket.fd(), &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

bool State::awaits_frames() const {
  if (!posted.empty()) return true;
  for (const Link& link : links) {
    if (!link.sends.empty() || !link.lent_out.empty() || link.in_payload) return true;
  }
  return false;
}

bool State::ask_for_pokes() {
  // Not while a caller reads the rings (it would be poked for its own reads), nor before a caller
  // waits without reading them (the receive's waiter reads; a message nobody waits for waits in
  // the ring for the receive that reads it), nor for a payload left in the ring on purpose (its
  // deadline wakes the thread).
  if (!awaits_frames()) unattended = false;
  const bool consumer = drivers == 0 && unattended;
  bool moved = false;
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    Link& link = links[peer];
    if (!link.shared() || !link.alive()) continue;
    const bool read = consumer && !link.buffer_at;
    link.in->ask_poke(ByteRing::Side::Consumer, read);
    if (read) moved |= link.in->readable();
    if (!link.sends.empty()) {
      link.out->ask_poke(ByteRing::Side::Producer, true);
      moved |= link.out->writable();
    }
  }
  return moved;
}

}  // namespace occl::transport::p2p
