#include "bootstrap.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
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

// Connections being heard out at once: enough that a flood of strangers cannot crowd out a
// member for long, few enough that it cannot exhaust the process's descriptors.
constexpr size_t kMaxCandidates = 64;

// An accepted connection that has not finished its Hello yet.
struct Candidate {
  Socket socket;
  Hello hello{};
  size_t received = 0;
  Deadline expires;
};

// Accepts connections until every rank above `rank` has presented a valid Hello, and stores its
// socket in peers[peer]. Candidates are heard out concurrently, each within kHelloTimeout, so
// strangers that send garbage, too little or nothing at all cost a member nothing but a slot.
void accept_members(const Socket& listener, int rank, int size, const Secret& secret,
                    std::vector<Socket>& peers, Deadline deadline) {
  int missing = size - rank - 1;
  std::vector<Candidate> candidates;
  std::vector<pollfd> fds;
  while (missing > 0) {
    Deadline wake = deadline;
    for (const auto& c : candidates) wake = std::min(wake, c.expires);
    fds.assign(1, {listener.fd(), POLLIN, 0});
    for (const auto& c : candidates) fds.push_back({c.socket.fd(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), millis_until(wake)) < 0 && errno != EINTR) {
      throw TransportError(TransportError::Kind::System, "poll while accepting ranks");
    }
    const Deadline now = Clock::now();
    if (now >= deadline) {
      std::string absent;
      for (int r = rank + 1; r < size; ++r) {
        if (!peers[r].valid()) absent += (absent.empty() ? "" : ", ") + std::to_string(r);
      }
      throw TransportError(TransportError::Kind::Timeout,
                           "timed out waiting for rank(s) " + absent + " to connect");
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      Candidate& c = candidates[i];
      if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::recv(c.socket.fd(), reinterpret_cast<char*>(&c.hello) + c.received,
                         sizeof(Hello) - c.received, 0);
      if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        c.expires = now;  // closed or failed: drop below
        continue;
      }
      c.received += static_cast<size_t>(n);
      if (c.received < sizeof(Hello)) continue;
      const Hello& h = c.hello;
      bool member = h.magic == kHelloMagic && h.version == kProtocolVersion && h.size == size &&
                    h.rank > rank && h.rank < size && !peers[h.rank].valid() &&
                    same_secret(h.secret, secret);
      c.expires = now;  // heard out: a member moves to peers, anyone else is dropped
      if (!member) continue;
      Hello reply{kHelloMagic, kProtocolVersion, rank, size, secret};
      try {
        c.socket.send_all(&reply, sizeof(reply), std::min(deadline, now + kHelloTimeout));
      } catch (const TransportError&) {
        continue;  // it went away before the reply: it will connect again or time out
      }
      peers[h.rank] = std::move(c.socket);
      --missing;
    }
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](const Candidate& c) { return c.expires <= now; }),
                     candidates.end());
    for (Socket s = listener.accept(now); s.valid(); s = listener.accept(now)) {
      if (candidates.size() == kMaxCandidates) candidates.erase(candidates.begin());  // oldest
      candidates.push_back({std::move(s), Hello{}, 0, now + kHelloTimeout});
    }
  }
}

Socket connect_member(c10d::Store& store, int rank, int size, int peer, const Secret& secret,
                      const BootstrapOptions& options, Deadline deadline) {
  const std::string key = address_key(options.channel, peer);
  std::istringstream in(wait_text(store, key, options.timeout));
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

void set_text(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string wait_text(c10d::Store& store, const std::string& key,
                      std::chrono::milliseconds timeout) {
  store.wait({key}, timeout);
  auto value = store.get(key);
  return std::string(value.begin(), value.end());
}

std::vector<Socket> connect_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                  int size, const BootstrapOptions& options) {
  std::vector<Socket> peers(static_cast<size_t>(size));
  if (size == 1) return peers;

  Deadline deadline = Clock::now() + options.timeout;
  Socket listener = Socket::listen(options.bind_address);
  std::string address = advertised_host(options.bind_address) + " " +
                        std::to_string(listener.port());
  set_text(*store, address_key(options.channel, rank), address);
  Secret secret = exchange_secret(*store, rank, options);

  for (int peer = 0; peer < rank; ++peer) {
    peers[peer] = connect_member(*store, rank, size, peer, secret, options, deadline);
  }
  accept_members(listener, rank, size, secret, peers, deadline);
  if (options.loopback_send_buffer_bytes > 0) {
    for (const Socket& peer : peers) {
      if (!peer.valid() || !peer.loopback()) continue;
      peer.limit_send_buffer(options.loopback_send_buffer_bytes);
    }
  }
  return peers;
}

}  // namespace occl::transport
