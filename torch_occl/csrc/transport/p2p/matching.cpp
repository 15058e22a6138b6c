// Pairs arriving messages with posted receives: a message matches the earliest posted receive
// with its sender (or any sender) and tag; a receive, the earliest message that arrived.
#include "state.hpp"

#include <cstring>

namespace occl::transport::p2p {

void State::add_send(int peer, SendRequest request) {
  Link& link = links[peer];
  if (!link.failure.empty()) {
    complete(request.callback, error(TransportError::Kind::PeerClosed, link.failure), -1);
    return;
  }
  if (peer_memory && request.header.bytes > 0 && request.header.bytes >= lend_min_bytes) {
    request.header.kind = kLent;
    request.lent = {region_of(request.data, request.header.bytes), link.next_lent_id++,
                    reinterpret_cast<uint64_t>(link.revoked.get())};
  }
  link.sends.push_back(std::move(request));
}

void State::add_recv(RecvRequest request) {
  // A message that already arrived matches first: earliest from one sender, in rank order across
  // senders for a receive from any source.
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    if (peer == rank || (request.peer != P2PEngine::kAnySource && request.peer != peer)) continue;
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
    if (peer == rank || (request.peer != P2PEngine::kAnySource && request.peer != peer)) continue;
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
  if (request.peer != P2PEngine::kAnySource && !links[request.peer].failure.empty()) {
    complete(request.callback,
             error(TransportError::Kind::PeerClosed, links[request.peer].failure), request.peer);
    return;
  }
  if (request.peer == P2PEngine::kAnySource && links.size() > 1 && every_link_failed()) {
    complete(request.callback,
             error(TransportError::Kind::PeerClosed, "every other rank closed its connection"),
             request.peer);
    return;
  }
  posted.push_back(std::move(request));
}

void State::start_message(int peer) {
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
  // Through a buffer, a ring's message is copied twice more: one of a pass or more waits too.
  const size_t waits_from = link.shared() ? Channel::kPassBytes : large_min_bytes;
  if (!link.discard && link.header.bytes > 0 && link.header.bytes >= waits_from &&
      link.arrived.empty()) {
    link.buffer_at = Clock::now() + kReceiveGrace;
  } else {
    link.buffer = Payload::of(link.header.bytes);
  }
}

void State::finish_message(int peer) {
  Link& link = links[peer];
  link.in_payload = false;
  link.header_done = 0;
  if (link.header.kind == kGaveUp) {
    std::string report(link.buffer.data.get(), link.buffer.size);
    link.buffer = {};
    if (on_peer_failure) {  // run as a completion, outside the lock
      Completion handler = [handle = on_peer_failure, peer, report](std::exception_ptr, int) {
        handle(peer, report);
      };
      complete(handler, nullptr, peer);
    }
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

}  // namespace occl::transport::p2p
