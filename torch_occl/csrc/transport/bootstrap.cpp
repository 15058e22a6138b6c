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
#include <thread>

namespace occl::transport {
namespace {

constexpr uint32_t kHelloMagic = 0x4f434c48;  // "OCLH"
constexpr uint32_t kProtocolVersion = 1;
constexpr size_t kSecretBytes = 16;
// A connection gets this long to introduce itself, so a silent stranger cannot stall bootstrap.
constexpr auto kHelloTimeout = std::chrono::seconds(5);
// How long a rank refused while joining waits for the generation pointer to move on before it
// concludes that the rank it was refused by is gone (rather than from an earlier attempt).
constexpr auto kStaleGrace = std::chrono::seconds(2);
// How often a rank waiting for higher ranks to connect probes the addresses they published.
constexpr auto kProbeEvery = std::chrono::milliseconds(500);
constexpr auto kProbeTimeout = std::chrono::milliseconds(200);
// Polling the store: short at first (most keys are there, or nearly), then at most this.
constexpr auto kMaxStorePoll = std::chrono::milliseconds(50);

// Store keys outside any generation (the store is already prefixed per group).
const std::string kGenerationCounter = "occl/generations";
const std::string kGenerationPointer = "occl/generation";

using Secret = std::array<uint8_t, kSecretBytes>;

struct Hello {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  int32_t size;
  Secret secret;
};

// The generation this rank joined is an old one: it starts over with the current one.
struct StaleGeneration {};

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

std::string text_of(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

std::string advertised_host(const std::string& bind_address) {
  if (bind_address != "0.0.0.0" && bind_address != "::") return bind_address;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

struct Address {
  std::string host;
  int port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

Address parse_address(const std::string& published) {
  std::istringstream in(published);
  Address address;
  in >> address.host >> address.port;
  return address;
}

std::string address_name(const std::string& channel, int rank) {
  return channel + "/address/" + std::to_string(rank);
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

}  // namespace

Bootstrap::Bootstrap(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                     std::chrono::milliseconds timeout)
    : store_(std::move(store)), rank_(rank), size_(size), deadline_(Clock::now() + timeout) {}

void Bootstrap::set(const std::string& name, const std::string& value) {
  store_->set(prefix_ + name, bytes_of(value));
}

// Polls rather than Store::wait, so that a rank that left ends the wait, and a wait that times
// out leaves no request pending in the store's client.
std::string Bootstrap::wait(const std::string& name) {
  const std::string key = prefix_ + name;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (store_->check({key})) return text_of(store_->get(key));
    check_watched();
    if (pause == kMaxStorePoll) check_given_up();
    if (Clock::now() + pause >= deadline_) {
      throw TransportError(TransportError::Kind::Timeout,
                           "timed out waiting for " + name + " in the store");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kMaxStorePoll);
  }
}

void Bootstrap::join_generation() {
  prefix_.clear();
  if (rank_ == 0) {
    generation_ = std::to_string(store_->add(kGenerationCounter, 1));
    prefix_ = "occl/" + generation_ + "/";
    Secret secret = make_secret();
    secret_.assign(secret.begin(), secret.end());
    store_->set(prefix_ + "secret", secret_);
    store_->set(kGenerationPointer, bytes_of(generation_));  // last: the others follow it
    return;
  }
  generation_ = wait(kGenerationPointer);  // no prefix yet: the pointer itself
  prefix_ = "occl/" + generation_ + "/";
  secret_ = bytes_of(wait("secret"));
  TORCH_CHECK(secret_.size() == kSecretBytes, "occl: malformed group secret in the store");
}

bool Bootstrap::generation_moved_on() {
  if (!store_->check({kGenerationPointer})) return false;  // removed: every rank had joined it
  return text_of(store_->get(kGenerationPointer)) != generation_;
}

namespace {

// Throws naming the first rank whose connection (rank, fd) has closed.
void check_closed(const std::vector<std::pair<int, int>>& connections) {
  if (connections.empty()) return;
  std::vector<pollfd> fds;
  for (const auto& [peer, fd] : connections) fds.push_back({fd, POLLRDHUP, 0});
  if (::poll(fds.data(), fds.size(), 0) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      throw TransportError(TransportError::Kind::PeerClosed,
                           "rank " + std::to_string(connections[i].first) +
                               " left during bootstrap (it closed its connection)");
    }
  }
}

}  // namespace

void Bootstrap::check_watched() {
  try {
    check_closed(watched_);
  } catch (const TransportError& e) {
    give_up(e);
  }
}

// A rank that found another gone says so in the store, so that the ranks it leaves behind name
// the rank that is gone, not the one that gave up (who then refuses them too).
void Bootstrap::give_up(const TransportError& error) {
  const std::string key = prefix_ + "gave-up";
  if (!prefix_.empty() && error.kind() == TransportError::Kind::PeerClosed &&
      !store_->check({key})) {
    store_->set(key, bytes_of("rank " + std::to_string(rank_) + " gave up: " + error.what()));
  }
  leave(error);
}

// Throws `error`, unless this rank may have followed an old generation's pointer (see
// bootstrap.hpp): then it waits a little for the pointer to move on, and starts over if it does.
void Bootstrap::leave(const TransportError& error) {
  if (joining_ && rank_ > 0) {
    const Deadline grace = std::min(deadline_, Clock::now() + kStaleGrace);
    for (;;) {
      if (generation_moved_on()) throw StaleGeneration{};
      if (Clock::now() >= grace) break;
      std::this_thread::sleep_for(kMaxStorePoll);
    }
  }
  throw error;
}

void Bootstrap::check_given_up() {
  if (prefix_.empty()) return;
  const std::string key = prefix_ + "gave-up";
  if (!store_->check({key})) return;
  leave(TransportError(TransportError::Kind::Aborted, text_of(store_->get(key))));
}

std::vector<Socket> Bootstrap::connect_group(const LinkOptions& options) {
  if (!joining_) return connect_links(options);
  std::vector<Socket> links;
  for (;;) {
    join_generation();
    try {
      links = connect_links(options);
      break;
    } catch (const StaleGeneration&) {
      continue;
    }
  }
  joining_ = false;
  // Every other rank has connected to rank 0, so every rank has followed the pointer.
  if (rank_ == 0) store_->deleteKey(kGenerationPointer);
  for (int peer = 0; peer < size_; ++peer) {
    if (links[peer].valid()) watched_.emplace_back(peer, links[peer].fd());
  }
  return links;
}

std::vector<Socket> Bootstrap::connect_links(const LinkOptions& options) {
  std::vector<Socket> links(static_cast<size_t>(size_));
  if (size_ == 1) return links;
  Socket listener = Socket::listen(options.bind_address);
  set(address_name(options.channel, rank_),
      advertised_host(options.bind_address) + " " + std::to_string(listener.port()));
  for (int peer = 0; peer < rank_; ++peer) links[peer] = connect_member(peer, options);
  accept_members(listener, options, links);
  if (options.loopback_send_buffer_bytes > 0) {
    for (const Socket& link : links) {
      if (link.valid() && link.loopback()) link.limit_send_buffer(options.loopback_send_buffer_bytes);
    }
  }
  return links;
}

Socket Bootstrap::connect_member(int peer, const LinkOptions& options) {
  const Address address = parse_address(wait(address_name(options.channel, peer)));
  Secret secret;
  std::copy(secret_.begin(), secret_.end(), secret.begin());
  std::string failure;
  try {
    Socket socket = Socket::connect(address.host, address.port, deadline_, false);
    Hello hello{kHelloMagic, kProtocolVersion, rank_, size_, secret};
    const Deadline hello_by = std::min(deadline_, Clock::now() + kHelloTimeout);
    socket.send_all(&hello, sizeof(hello), hello_by);
    Hello reply{};
    socket.recv_all(&reply, sizeof(reply), hello_by);
    if (reply.magic == kHelloMagic && reply.rank == peer && same_secret(reply.secret, secret)) {
      return socket;
    }
    failure = "it answered with a bad handshake";
  } catch (const TransportError& e) {
    if (e.kind() == TransportError::Kind::Timeout && Clock::now() >= deadline_) {
      throw TransportError(TransportError::Kind::Timeout,
                           "timed out connecting to rank " + std::to_string(peer) + " at " +
                               address.text());
    }
    failure = e.what();
  }
  // Refused, closed or answered wrongly where this generation says the rank listens: it gave
  // up because another rank is gone, or it is gone itself.
  check_given_up();
  give_up(TransportError(TransportError::Kind::PeerClosed,
                         "rank " + std::to_string(peer) + " left during bootstrap (at " +
                             address.text() + ", which it published: " + failure + ")"));
}

// Ranks whose links of this set have closed, and higher ranks that have published an address
// but refuse connections there, are gone. Once the first links exist, they watch over every rank
// instead.
void Bootstrap::probe_unconnected(const LinkOptions& options, const std::vector<Socket>& links) {
  check_given_up();
  check_watched();
  if (!watched_.empty()) return;
  std::vector<std::pair<int, int>> connected;  // ranks of these links that connected already
  for (int peer = 0; peer < size_; ++peer) {
    if (links[peer].valid()) connected.emplace_back(peer, links[peer].fd());
  }
  try {
    check_closed(connected);
  } catch (const TransportError& e) {
    give_up(e);
  }
  for (int peer = rank_ + 1; peer < size_; ++peer) {
    const std::string key = prefix_ + address_name(options.channel, peer);
    if (links[peer].valid() || !store_->check({key})) continue;
    const Address address = parse_address(text_of(store_->get(key)));
    try {
      // A probe that connects is closed at once; the rank drops it like any silent stranger.
      Socket::connect(address.host, address.port, Clock::now() + kProbeTimeout, false);
    } catch (const TransportError& e) {
      if (e.kind() != TransportError::Kind::PeerClosed) continue;  // busy, not gone
      give_up(TransportError(TransportError::Kind::PeerClosed,
                             "rank " + std::to_string(peer) + " left during bootstrap (at " +
                                 address.text() + ", which it published: " + e.what() + ")"));
    }
  }
}

// Accepts connections until every rank above this one has presented a valid Hello, and stores
// its socket in links[peer]. Candidates are heard out concurrently, each within kHelloTimeout,
// so strangers that send garbage, too little or nothing at all cost a member nothing but a slot.
void Bootstrap::accept_members(const Socket& listener, const LinkOptions& options,
                               std::vector<Socket>& links) {
  Secret secret;
  std::copy(secret_.begin(), secret_.end(), secret.begin());
  int missing = size_ - rank_ - 1;
  std::vector<Candidate> candidates;
  std::vector<pollfd> fds;
  Deadline next_probe = Clock::now() + kProbeEvery;
  while (missing > 0) {
    Deadline wake = std::min(deadline_, next_probe);
    for (const auto& c : candidates) wake = std::min(wake, c.expires);
    fds.assign(1, {listener.fd(), POLLIN, 0});
    for (const auto& c : candidates) fds.push_back({c.socket.fd(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), millis_until(wake)) < 0 && errno != EINTR) {
      throw TransportError(TransportError::Kind::System, "poll while accepting ranks");
    }
    const Deadline now = Clock::now();
    if (now >= deadline_) {
      std::string absent;
      for (int r = rank_ + 1; r < size_; ++r) {
        if (!links[r].valid()) absent += (absent.empty() ? "" : ", ") + std::to_string(r);
      }
      throw TransportError(TransportError::Kind::Timeout,
                           "timed out waiting for rank(s) " + absent + " to connect");
    }
    if (now >= next_probe) {
      probe_unconnected(options, links);
      next_probe = Clock::now() + kProbeEvery;
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
      bool member = h.magic == kHelloMagic && h.version == kProtocolVersion && h.size == size_ &&
                    h.rank > rank_ && h.rank < size_ && !links[h.rank].valid() &&
                    same_secret(h.secret, secret);
      c.expires = now;  // heard out: a member moves to links, anyone else is dropped
      if (!member) continue;
      Hello reply{kHelloMagic, kProtocolVersion, rank_, size_, secret};
      try {
        c.socket.send_all(&reply, sizeof(reply), std::min(deadline_, now + kHelloTimeout));
      } catch (const TransportError&) {
        continue;  // it went away before the reply: it will connect again or time out
      }
      links[h.rank] = std::move(c.socket);
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

}  // namespace occl::transport
