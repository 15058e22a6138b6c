// How requests end other than well: a link that failed, an abort, a deadline that passed.
#include "state.hpp"

#include <unistd.h>

#include <algorithm>

namespace occl::transport::p2p {

State::~State() {
  if (wake_fd >= 0) ::close(wake_fd);
}

void State::complete(Completion& callback, std::exception_ptr failure, int source) {
  if (!callback) return;  // a kCopied reply that no receive waits for
  ready.push_back({std::move(callback), std::move(failure), source});
}

bool State::every_link_failed() const {
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    if (peer != rank && links[peer].failure.empty()) return false;
  }
  return true;
}

void State::fail_link(int peer, TransportError::Kind kind, const std::string& why) {
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

void State::fail_all(TransportError::Kind kind, const std::string& why) {
  for (int peer = 0; peer < static_cast<int>(links.size()); ++peer) {
    if (peer != rank) fail_link(peer, kind, why);
  }
  for (auto& recv : posted) complete(recv.callback, error(kind, why), recv.peer);
  posted.clear();
}

void State::expire(Deadline now) {
  for (auto it = posted.begin(); it != posted.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    std::string from = it->peer == P2PEngine::kAnySource ? "any rank"
                                                         : "rank " + std::to_string(it->peer);
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

Deadline State::next_deadline() const {
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

}  // namespace occl::transport::p2p
