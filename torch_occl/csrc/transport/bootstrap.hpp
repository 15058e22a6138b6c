// Connects the ranks of a group through the c10d::Store that torch.distributed hands the backend.
//
// The store carries each rank's listening address and a per-group random secret, nothing else.
// Rank r connects to every lower rank and accepts every higher one; a connection that does not
// present the group's secret and a plausible rank is dropped without disturbing the group.
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

struct BootstrapOptions {
  std::string bind_address;           // where this rank listens
  std::chrono::milliseconds timeout;  // for the whole bootstrap
  std::string channel;                // names this set of links' store keys ("collective", "p2p")
  size_t loopback_send_buffer_bytes = 0;  // SO_SNDBUF of links within this host (0: the kernel's)
};

// Store values as text: `set_text` writes one, `wait_text` waits (up to `timeout`) and reads one.
void set_text(c10d::Store& store, const std::string& key, const std::string& value);
std::string wait_text(c10d::Store& store, const std::string& key, std::chrono::milliseconds timeout);

// One connection to every other rank (links[rank] stays invalid). Every rank of the group must
// call it with the same channel.
std::vector<Socket> connect_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                  int size, const BootstrapOptions& options);

}  // namespace occl::transport
