// The failures the engine tells apart: a link failure breaks the group, anything else fails one op.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace occl::kit {

// A runtime throws this when its links to other ranks failed mid-op: messages may be half sent,
// so the engine fails every later op of the group at once ("fail-fast") instead of running it.
// Any other exception from an op fails that op only.
class LinkError : public std::runtime_error {
 public:
  enum class Kind { Timeout, PeerClosed, Protocol, System, Aborted };
  LinkError(Kind kind, const std::string& what, std::vector<int> awaited = {})
      : std::runtime_error(what), kind_(kind), awaited_(std::move(awaited)) {}
  Kind kind() const { return kind_; }
  // For a timeout: the ranks it was still waiting for. For PeerClosed because a rank gave up on
  // the group before saying why: that rank, whose report (if it comes) explains the failure.
  const std::vector<int>& awaited() const { return awaited_; }

 private:
  Kind kind_;
  std::vector<int> awaited_;
};

// Ranks called different collectives at the same point of their sequence (see signature.hpp).
// Every rank sent and received exactly one signature, so the group stays usable.
class MismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace occl::kit
