// What point-to-point frames look like on a link, socket or shared-memory ring alike: a header,
// then (by kind) the message's bytes, where a lent message lies, or a rank's failure report.
// Both ends run the same build, so structs travel as bytes.
#pragma once

#include "../peer_buffer.hpp"

#include <cstdint>

namespace occl::transport::p2p {

constexpr uint32_t kMagic = 0x4f435032;  // "OCP2"

enum FrameKind : uint32_t {
  kMessage = 0,  // tag, bytes, then the message's bytes
  kLent = 1,     // tag, bytes, then a LentMessage: the bytes stay in the sender's memory
  kCopied = 2,   // tag: a LentMessage's id; the receiver is done with it, the send completes
  kGaveUp = 3,   // bytes, then the text of the sender's report that it gave up on a collective
};
// A longer report is a bad frame: it is an error message, not data.
constexpr uint64_t kMaxReportBytes = 64 * 1024;

struct Header {
  uint32_t magic;
  uint32_t kind;
  int64_t tag;
  uint64_t bytes;  // the message's size, for kMessage and kLent

  bool valid() const {
    return magic == kMagic && kind <= kGaveUp && (kind != kGaveUp || bytes <= kMaxReportBytes);
  }
};

struct LentMessage {
  Region region;     // the message in the sender's memory
  uint64_t id;       // the sender's name for it, echoed by kCopied
  uint64_t revoked;  // address of the sender's Link::revoked for this link
};

}  // namespace occl::transport::p2p
