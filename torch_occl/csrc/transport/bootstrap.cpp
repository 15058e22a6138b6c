#include "bootstrap.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <sstream>
#include <thread>

namespace occl::transport {
namespace {

// A connection gets this long to complete its handshake, so a silent stranger cannot stall
// bootstrap.
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

// The generation this rank joined is an old one: it starts over with the current one.
struct StaleGeneration {};

std::string text_of(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

// What a rank publishes of each set of links: where it listens, and who it is.
struct Address {
  std::string host;
  int port = 0;
  uint32_t pid = 0;
  std::string nonce;  // hex
  std::string text() const { return host + ":" + std::to_string(port); }
  std::string record() const {
    return host + " " + std::to_string(port) + " " + std::to_string(pid) + " " + nonce;
  }
};

Address parse_address(const std::string& published) {
  std::istringstream in(published);
  Address address;
  in >> address.host >> address.port >> address.pid >> address.nonce;
  return address;
}

std::string address_name(const std::string& channel, int rank) {
  return channel + "/address/" + std::to_string(rank);
}

// Set by `acceptor` once it accepted `connector`: that connection's challenge, and whence it came.
std::string joined_name(const std::string& channel, int acceptor, int connector) {
  return channel + "/joined/" + std::to_string(acceptor) + "/" + std::to_string(connector);
}

std::string describe(const Socket& socket, const Hello& hello) {
  return "from " + socket.peer_name() + ", pid " + std::to_string(hello.pid);
}

// A connection closed before its Challenge came may have been crowded out (see accept_members):
// it is tried again until the deadline, pausing longer each time up to the last.
constexpr auto kFirstRetryPause = std::chrono::milliseconds(10);
constexpr auto kLastRetryPause = std::chrono::milliseconds(200);
// A rank answers a Challenge within a round trip. A connection that showed the secret but is
// silent this long after its Challenge gives up its slot when all are taken, so that processes
// that read the store cannot hold every slot.
constexpr auto kProofPatience = std::chrono::milliseconds(250);

// Connections being heard out at once: enough that a flood of strangers cannot crowd out a
// member for long, few enough that it cannot exhaust the process's descriptors.
constexpr size_t kMaxCandidates = 64;

// A handshake message to a candidate: false if it went away first.
bool send_within(const Socket& socket, const void* data, size_t bytes, Deadline by) {
  try {
    socket.send_all(data, bytes, by);
    return true;
  } catch (const TransportError&) {
    return false;
  }
}

}  // namespace

// An accepted connection in the middle of its handshake (handshake.hpp).
struct Bootstrap::Candidate {
  Socket socket;
  Deadline expires;
  bool sent_challenge = false;  // then it owes its Proof, else its Hello
  Deadline challenged_at;
  size_t received = 0;          // of the message it owes
  Hello hello{};
  Nonce challenge{};
  Proof proof{};
  void* buffer() { return sent_challenge ? static_cast<void*>(&proof) : &hello; }
  size_t owed() const { return sent_challenge ? sizeof(Proof) : sizeof(Hello); }
};

Bootstrap::Bootstrap(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                     std::chrono::milliseconds timeout)
    : store_(std::move(store)),
      rank_(rank),
      size_(size),
      deadline_(Clock::now() + timeout),
      key_(AuthKey::from_env()),
      member_nonce_(random_nonce()) {}

void Bootstrap::wait_readable(const Socket& socket) {
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, kMaxStorePoll)) {
    pollfd fd{socket.fd(), POLLIN, 0};
    const int wait_ms = std::min<int>(static_cast<int>(pause.count()), millis_until(deadline_));
    if (::poll(&fd, 1, wait_ms) > 0) return;
    check_watched();
    if (pause == kMaxStorePoll) check_given_up();
    if (Clock::now() >= deadline_) {
      throw TransportError(TransportError::Kind::Timeout, "timed out receiving");
    }
  }
}

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
    secret_ = random_nonce();
    store_->set(prefix_ + "secret", std::vector<uint8_t>(secret_.begin(), secret_.end()));
    store_->set(kGenerationPointer, bytes_of(generation_));  // last: the others follow it
    return;
  }
  generation_ = wait(kGenerationPointer);  // no prefix yet: the pointer itself
  prefix_ = "occl/" + generation_ + "/";
  const std::string secret = wait("secret");
  TORCH_CHECK(secret.size() == secret_.size(), "occl: malformed group secret in the store");
  std::copy(secret.begin(), secret.end(), secret_.begin());
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
void Bootstrap::give_up(const TransportError& error, Evidence evidence) {
  const std::string key = prefix_ + "gave-up";
  const bool names_a_rank = error.kind() == TransportError::Kind::PeerClosed ||
                            error.kind() == TransportError::Kind::Protocol;
  if (!prefix_.empty() && names_a_rank && !store_->check({key})) {
    store_->set(key, bytes_of("rank " + std::to_string(rank_) + " gave up: " + error.what()));
  }
  leave(error, evidence);
}

// Throws `error`, unless this rank may have followed an old generation's pointer (see
// bootstrap.hpp): then it waits a little for the pointer to move on, and starts over if it does.
void Bootstrap::leave(const TransportError& error, Evidence evidence) {
  if (joining_ && rank_ > 0 && evidence == Evidence::MaybeStale) {
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
  for (int peer = 0; peer < size_; ++peer) {
    if (links[peer].valid()) watched_.emplace_back(peer, links[peer].fd());
  }
  return links;
}

// Every other rank has connected to rank 0, so every rank has followed the pointer. Not earlier:
// a rank that an impostor's link to rank 0 kept out must still find the generation, to learn that
// its place was taken.
void Bootstrap::finish() {
  if (rank_ == 0) store_->deleteKey(kGenerationPointer);
}

std::vector<Socket> Bootstrap::connect_links(const LinkOptions& options) {
  std::vector<Socket> links(static_cast<size_t>(size_));
  if (size_ == 1) return links;
  Socket listener = Socket::listen(options.bind_address);
  const Address own{advertised_host(options.bind_address), listener.port(),
                    static_cast<uint32_t>(::getpid()), hex(member_nonce_)};
  set(address_name(options.channel, rank_), own.record());
  if (proven_pids_.empty()) {
    proven_pids_.assign(static_cast<size_t>(size_), 0);
    proven_pids_[rank_] = static_cast<uint32_t>(::getpid());
  }
  for (int peer = 0; peer < rank_; ++peer) links[peer] = connect_member(peer, options);
  accept_members(listener, own.record(), options, links);
  if (options.loopback_send_buffer_bytes > 0) {
    for (const Socket& link : links) {
      if (link.valid() && link.loopback()) link.limit_send_buffer(options.loopback_send_buffer_bytes);
    }
  }
  return links;
}

Socket Bootstrap::connect_member(int peer, const LinkOptions& options) {
  const std::string published = wait(address_name(options.channel, peer));
  Hello hello{};
  hello.magic = kHandshakeMagic;
  hello.version = kHandshakeVersion;
  hello.rank = rank_;
  hello.size = size_;
  hello.flags = key_ ? kHelloHoldsKey : 0;
  hello.pid = static_cast<uint32_t>(::getpid());
  hello.secret = secret_;
  hello.member_nonce = member_nonce_;
  Attempt attempt;
  for (auto pause = kFirstRetryPause;; pause = std::min(pause * 2, kLastRetryPause)) {
    hello.challenge = random_nonce();
    attempt = handshake_with(peer, options.channel, published, hello);
    if (!attempt.crowded_out) break;
    if (Clock::now() + pause >= deadline_) {
      throw TransportError(TransportError::Kind::Timeout,
                           "timed out connecting to rank " + std::to_string(peer) + " at " +
                               parse_address(published).text() +
                               ": other connections kept taking its place (" + attempt.failure +
                               ")");
    }
    std::this_thread::sleep_for(pause);
  }
  if (attempt.socket.valid()) {
    // The acceptor's proof covered this record (with a key); without one, the process checks
    // it against itself (connect_shared_memory).
    proven_pids_[peer] = parse_address(published).pid;
    return std::move(attempt.socket);
  }
  if (attempt.refused) {
    give_up(TransportError(TransportError::Kind::Protocol,
                           refusal_reason(*attempt.refused, peer, rank_)),
            Evidence::ThisGeneration);
  }
  // Refused, closed or answered wrongly where this generation says the rank listens: it gave
  // up because another rank is gone, it took another process for this rank, or it is gone itself.
  check_given_up();
  check_taken(peer, options.channel, hello);
  give_up(TransportError(TransportError::Kind::PeerClosed,
                         "rank " + std::to_string(peer) + " left during bootstrap (at " +
                             parse_address(published).text() + ", which it published: " +
                             attempt.failure + ")"));
}

// One connection to `peer` at the address it `published`, and the handshake on it.
Bootstrap::Attempt Bootstrap::handshake_with(int peer, const std::string& channel,
                                             const std::string& published, const Hello& hello) {
  const Address address = parse_address(published);
  Attempt attempt;
  bool connected = false, challenged = false;
  try {
    Socket socket = Socket::connect(address.host, address.port, deadline_, false);
    connected = true;
    const Deadline hello_by = std::min(deadline_, Clock::now() + kHelloTimeout);
    socket.send_all(&hello, sizeof(hello), hello_by);
    Challenge challenge{};
    socket.recv_all(&challenge, sizeof(challenge), hello_by);
    challenged = true;
    Answer answer{};
    if (challenge.magic == kHandshakeMagic) {
      const Proof proof{connector_proof(auth_key(), channel, published, peer, hello,
                                        challenge.challenge)};
      socket.send_all(&proof, sizeof(proof), hello_by);
      socket.recv_all(&answer, sizeof(answer), hello_by);
    }
    const Mac expected = acceptor_proof(auth_key(), channel, published, peer, hello,
                                        challenge.challenge, answer.verdict);
    if (answer.magic != kHandshakeMagic || answer.rank != peer ||
        !equal_bytes(answer.secret.data(), secret_.data(), secret_.size())) {
      attempt.failure = "it answered with a bad handshake";
    } else if (verdict_after_proof(answer.verdict) &&
               !equal_bytes(answer.mac.data(), expected.data(), expected.size())) {
      attempt.failure = "it answered without proving it holds the key";
    } else if (answer.verdict != Verdict::Accepted) {
      attempt.refused = answer.verdict;
    } else {
      attempt.socket = std::move(socket);
    }
  } catch (const TransportError& e) {
    if (e.kind() == TransportError::Kind::Timeout && Clock::now() >= deadline_) {
      throw TransportError(TransportError::Kind::Timeout,
                           "timed out connecting to rank " + std::to_string(peer) + " at " +
                               address.text());
    }
    attempt.failure = e.what();
    attempt.crowded_out = connected && !challenged;
  }
  return attempt;
}

// Throws if `peer` accepted another connection as this rank (it then stopped listening, or
// refused this one).
void Bootstrap::check_taken(int peer, const std::string& channel, const Hello& hello) {
  const std::string key = prefix_ + joined_name(channel, peer, rank_);
  if (!store_->check({key})) return;
  std::istringstream record(text_of(store_->get(key)));
  std::string challenge, whence;
  record >> challenge;
  std::getline(record >> std::ws, whence);
  if (challenge == hex(hello.challenge)) return;  // it was this one
  // The record may also be an interrupted attempt's, whose pointer this rank followed: then the
  // grace in leave() finds the next generation, unless `peer` starts later than that.
  give_up(TransportError(TransportError::Kind::Protocol,
                         refusal_reason(Verdict::RankTaken, peer, rank_) + "; it came " + whence +
                             ". (Or rank " + std::to_string(peer) + " has not started yet and " +
                             "this is what an earlier attempt left in the store: start every " +
                             "rank within 2 s of the others.)"));
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

// Accepts connections until every rank above this one has completed the handshake, and stores
// its socket in links[peer]. Candidates are heard out concurrently, each within kHelloTimeout,
// so strangers that send garbage, too little or nothing at all cost a member nothing but a slot.
void Bootstrap::accept_members(const Socket& listener, const std::string& own_record,
                               const LinkOptions& options, std::vector<Socket>& links) {
  int missing = size_ - rank_ - 1;
  std::vector<std::string> joined_from(static_cast<size_t>(size_));  // describe() of each link
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
    const Deadline answer_by = std::min(deadline_, now + kHelloTimeout);
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
      ssize_t n = ::recv(c.socket.fd(), static_cast<char*>(c.buffer()) + c.received,
                         c.owed() - c.received, 0);
      if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        c.expires = now;  // closed or failed: drop below
        continue;
      }
      c.received += static_cast<size_t>(n);
      if (c.received < c.owed()) continue;
      c.received = 0;
      if (!c.sent_challenge) {
        const Hello& h = c.hello;
        if (h.magic != kHandshakeMagic || h.version != kHandshakeVersion || h.size != size_ ||
            h.rank <= rank_ || h.rank >= size_ ||
            !equal_bytes(h.secret.data(), secret_.data(), secret_.size())) {
          c.expires = now;  // a stranger: dropped without a word
          continue;
        }
        c.challenge = random_nonce();
        const Challenge challenge{kHandshakeMagic, c.challenge};
        if (!send_within(c.socket, &challenge, sizeof(challenge), answer_by)) c.expires = now;
        c.sent_challenge = true;
        c.challenged_at = now;
        continue;
      }
      c.expires = now;  // heard out: a member moves to links, anyone else is dropped
      const Verdict verdict = judge(c, own_record, options.channel, links);
      Answer answer{kHandshakeMagic, verdict, rank_, secret_, Mac{}};
      if (verdict_after_proof(verdict)) {
        answer.mac = acceptor_proof(auth_key(), options.channel, own_record, rank_, c.hello,
                                    c.challenge, verdict);
      }
      const bool answered = send_within(c.socket, &answer, sizeof(answer), answer_by);
      const int peer = c.hello.rank;
      if (verdict == Verdict::RankTaken) {
        give_up(TransportError(TransportError::Kind::Protocol,
                               "two processes joined rank " + std::to_string(rank_) + " as rank " +
                                   std::to_string(peer) + ", first " + joined_from[peer] +
                                   ", then " + describe(c.socket, c.hello) +
                                   ": one of them is not rank " + std::to_string(peer) +
                                   kImpostorHint),
                Evidence::ThisGeneration);
      }
      if (verdict == Verdict::NotAnnounced) {
        give_up(TransportError(TransportError::Kind::Protocol,
                               "a process " + describe(c.socket, c.hello) +
                                   " presented itself as rank " + std::to_string(peer) +
                                   ", which published another pid or nonce, or none yet: it is "
                                   "not rank " + std::to_string(peer) + kImpostorHint),
                Evidence::ThisGeneration);
      }
      // A rank refused for its key gives up, telling the others. One gone before the answer:
      // it will time out, or its rank connects again.
      if (verdict != Verdict::Accepted || !answered) continue;
      joined_from[peer] = describe(c.socket, c.hello);
      set(joined_name(options.channel, rank_, peer),
          hex(c.hello.challenge) + " " + joined_from[peer]);
      proven_pids_[peer] = c.hello.pid;
      links[peer] = std::move(c.socket);
      --missing;
    }
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](const Candidate& c) { return c.expires <= now; }),
                     candidates.end());
    // At most a table's worth per pass, so that a flood of connections cannot keep this loop
    // from its deadline and its probes.
    for (size_t accepted = 0; accepted < kMaxCandidates; ++accepted) {
      Socket s = listener.accept(now);
      if (!s.valid()) break;
      if (candidates.size() == kMaxCandidates) {
        // Room is made by the oldest that has not shown the secret, else by the oldest that
        // showed it but has not answered its Challenge in time; if none, the newcomer is dropped.
        auto victim = std::find_if(candidates.begin(), candidates.end(),
                                   [](const Candidate& c) { return !c.sent_challenge; });
        if (victim == candidates.end()) {
          victim = std::find_if(candidates.begin(), candidates.end(), [&](const Candidate& c) {
            return now - c.challenged_at >= kProofPatience;
          });
        }
        if (victim == candidates.end()) continue;
        candidates.erase(victim);
      }
      Candidate candidate;
      candidate.socket = std::move(s);
      candidate.expires = now + kHelloTimeout;
      candidates.push_back(std::move(candidate));
    }
  }
}

// What the acceptor answers a connection that sent a well-formed Hello with the secret, and its
// Proof. Checks of the key come first: without a key, nobody can be told apart from the rank it
// claims to be, so a second claim of a rank, or one the store does not announce, is an impostor.
Verdict Bootstrap::judge(const Candidate& c, const std::string& own_record,
                         const std::string& channel, const std::vector<Socket>& links) {
  const bool holds_key = (c.hello.flags & kHelloHoldsKey) != 0;
  if (key_ && !holds_key) return Verdict::KeyRequired;
  if (!key_ && holds_key) return Verdict::KeyUnexpected;
  const Mac expected =
      connector_proof(auth_key(), channel, own_record, rank_, c.hello, c.challenge);
  if (!equal_bytes(c.proof.mac.data(), expected.data(), expected.size())) {
    return Verdict::KeyRejected;
  }
  if (links[c.hello.rank].valid()) return Verdict::RankTaken;
  const std::string key = prefix_ + address_name(channel, c.hello.rank);
  if (!store_->check({key})) return Verdict::NotAnnounced;
  const Address published = parse_address(text_of(store_->get(key)));
  const bool announced =
      published.pid == c.hello.pid &&
      published.nonce == hex(c.hello.member_nonce);
  return announced ? Verdict::Accepted : Verdict::NotAnnounced;
}

}  // namespace occl::transport
