// Lent messages: the receiver copies them out of the sender's memory (peer_buffer.hpp), then
// tells the sender its buffer is free, which completes the send.
#include "state.hpp"

#include <atomic>

namespace occl::transport::p2p {

void State::on_lent(int peer) {
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

void State::receive_lent(int peer, int64_t tag, const LentArrival& lent, RecvRequest& recv) {
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

std::exception_ptr State::copy_lent(int peer, const LentArrival& lent, void* into) {
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

void State::send_copied(int peer, uint64_t id, Completion written) {
  Link& link = links[peer];
  if (!link.failure.empty()) {
    complete(written, nullptr, -1);
    return;
  }
  // Ahead of the messages queued to the peer (behind one half on the wire): the answer frees
  // the sender's buffer and ends its send, and must not wait until the peer receives them.
  auto at = link.sends.begin();
  if (at != link.sends.end() && at->done > 0) ++at;
  link.sends.insert(at, SendRequest{{kMagic, kCopied, static_cast<int64_t>(id), 0}, nullptr,
                                    0, Deadline::max(), std::move(written)});
}

void State::on_copied(int peer, uint64_t id) {
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
void State::buffer_lent(Deadline now) {
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

}  // namespace occl::transport::p2p
