#include "bootstrap.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <unistd.h>

#include <array>
#include <random>
#include <sstream>

namespace occl::transport {
namespace {

constexpr uint32_t kHelloMagic = 0x4f434c48;  // "OCLH"
constexpr uint32_t kProtocolVersion = 1;
constexpr size_t kSecretBytes = 16;
// A connection gets this long to introduce itself, so a silent stranger cannot stall bootstrap.
constexpr auto kHelloTimeout = std::chrono::seconds(5);

using Secret = std::array<uint8_t, kSecretBytes>;

struct Hello {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  int32_t size;
  Secret secret;
};

std::string address_key(const std::string& channel, int rank) {
  return "occl/" + channel + "/address/" + std::to_string(rank);
}
std::string secret_key(const std::string& channel) { return "occl/" + channel + "/secret"; }

std::vector<uint8_t> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }

Secret make_secret() {
  std::random_device device;  // reads the OS entropy pool
  Secret secret;
  for (auto& byte : secret) byte = static_cast<uint8_t>(device());
  return secret;
}

bool same_secret(const Secret& a, const Secret& b) {
  uint8_t diff = 0;  // constant time: no early exit that leaks how many bytes matched
  for (size_t i = 0; i < kSecretBytes; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

Secret exchange_secret(c10d::Store& store, int rank, const BootstrapOptions& options) {
  const std::string key = secret_key(options.channel);
  if (rank == 0) {
    Secret secret = make_secret();
    store.set(key, std::vector<uint8_t>(secret.begin(), secret.end()));
    return secret;
  }
  store.wait({key}, options.timeout);
  auto bytes = store.get(key);
  TORCH_CHECK(bytes.size() == kSecretBytes, "occl: malformed group secret in the store");
  Secret secret;
  std::copy(bytes.begin(), bytes.end(), secret.begin());
  return secret;
}

std::string advertised_host(const std::string& bind_address) {
  if (bind_address != "0.0.0.0" && bind_address != "::") return bind_address;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// Accepts connections until one is a valid member `rank < peer < size` not yet connected, and
// stores its socket in peers[peer].
void accept_member(const Socket& listener, int rank, int size, const Secret& secret,
                  std::vector<Socket>& peers, Deadline deadline) {
  for (;;) {
    Socket candidate = listener.accept(deadline);
    if (!candidate.valid()) {
      throw TransportError(TransportError::Kind::Timeout,
                           "timed out waiting for higher ranks to connect");
    }
    Hello hello{};
    try {
      candidate.recv_all(&hello, sizeof(hello), std::min(deadline, Clock::now() + kHelloTimeout));
    } catch (const TransportError&) {
      continue;  // a stranger or a broken connection: drop it, keep listening
    }
    bool valid = hello.magic == kHelloMagic && hello.version == kProtocolVersion &&
                 hello.size == size && hello.rank > rank && hello.rank < size &&
                 !peers[hello.rank].valid() && same_secret(hello.secret, secret);
    if (!valid) continue;
    Hello reply{kHelloMagic, kProtocolVersion, rank, size, secret};
    candidate.send_all(&reply, sizeof(reply), deadline);
    peers[hello.rank] = std::move(candidate);
    return;
  }
}

Socket connect_member(c10d::Store& store, int rank, int size, int peer, const Secret& secret,
                      const BootstrapOptions& options, Deadline deadline) {
  const std::string key = address_key(options.channel, peer);
  store.wait({key}, options.timeout);
  auto value = store.get(key);
  std::istringstream in(std::string(value.begin(), value.end()));
  std::string host;
  int port = 0;
  in >> host >> port;
  Socket socket = Socket::connect(host, port, deadline);
  Hello hello{kHelloMagic, kProtocolVersion, rank, size, secret};
  socket.send_all(&hello, sizeof(hello), deadline);
  Hello reply{};
  socket.recv_all(&reply, sizeof(reply), deadline);
  if (reply.magic != kHelloMagic || reply.rank != peer || !same_secret(reply.secret, secret)) {
    throw TransportError(TransportError::Kind::Protocol,
                         "rank " + std::to_string(peer) + " at " + host + ":" +
                             std::to_string(port) + " answered with a bad handshake");
  }
  return socket;
}

}  // namespace

std::vector<Socket> connect_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                  int size, const BootstrapOptions& options) {
  std::vector<Socket> peers(static_cast<size_t>(size));
  if (size == 1) return peers;

  Deadline deadline = Clock::now() + options.timeout;
  Socket listener = Socket::listen(options.bind_address);
  std::string address = advertised_host(options.bind_address) + " " +
                        std::to_string(listener.port());
  store->set(address_key(options.channel, rank), to_bytes(address));
  Secret secret = exchange_secret(*store, rank, options);

  for (int peer = 0; peer < rank; ++peer) {
    peers[peer] = connect_member(*store, rank, size, peer, secret, options, deadline);
  }
  for (int accepted = rank + 1; accepted < size; ++accepted) {
    accept_member(listener, rank, size, secret, peers, deadline);
  }
  return peers;
}

}  // namespace occl::transport
