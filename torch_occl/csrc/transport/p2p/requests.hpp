// What the p2p engine holds for the requests it was given and the messages nobody received yet.
#pragma once

#include "../p2p.hpp"
#include "wire.hpp"

#include <optional>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

namespace occl::transport::p2p {

using Completion = P2PEngine::Completion;

struct SendRequest {
  Header header;
  const char* data;
  size_t done;  // bytes of header + payload written so far
  Deadline deadline;
  Completion callback;  // for a kCopied reply: empty, or a receive waiting for it
  LentMessage lent{};   // the payload of a kLent frame
  std::shared_ptr<const std::string> report;  // the payload of a kGaveUp frame, kept alive

  const char* payload() const {
    return header.kind == kLent ? reinterpret_cast<const char*>(&lent) : data;
  }
  size_t payload_bytes() const {
    if (header.kind == kLent) return sizeof(LentMessage);
    return header.kind == kMessage || header.kind == kGaveUp ? header.bytes : 0;
  }
  size_t total() const { return sizeof(Header) + payload_bytes(); }
};

// A lent send whose receiver has not copied it yet.
struct LentSend {
  Completion callback;
  Deadline deadline;
};

struct RecvRequest {
  int peer;  // or kAnySource
  int64_t tag;
  char* data;
  size_t bytes;
  Deadline deadline;
  Completion callback;

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
  uint64_t revoked;    // where the sender says it let the message go
  Deadline buffer_at;  // when the receiver copies it into a Payload after all
};

struct Arrived {
  int64_t tag;
  Payload payload;
  std::optional<LentArrival> lent;  // set while the bytes are still in the sender's memory
};

inline std::exception_ptr error(TransportError::Kind kind, const std::string& what) {
  return std::make_exception_ptr(TransportError(kind, what));
}

inline std::exception_ptr size_mismatch(int peer, int64_t tag, size_t expected, size_t got) {
  return error(TransportError::Kind::Protocol,
               "rank " + std::to_string(peer) + " sent " + std::to_string(got) +
                   " bytes with tag " + std::to_string(tag) + ", but the receive expects " +
                   std::to_string(expected));
}

}  // namespace occl::transport::p2p
