// The handshake by which a rank joins another while their group forms (bootstrap.cpp drives it):
//
//   connector -> acceptor  Hello      its rank, the group's secret (from the store), what its rank
//                                     published there (pid, nonce), a fresh challenge, whether it
//                                     holds a key
//   acceptor -> connector  Challenge  a fresh challenge of the acceptor's
//   connector -> acceptor  Proof      HMAC(key, "connect", transcript of both challenges)
//   acceptor -> connector  Answer     the verdict, and HMAC(key, "accept", the same transcript,
//                                     the verdict)
//
// Without a key the MACs are zero. The acceptor drops a connection whose Hello is malformed or
// lacks the secret without a word (a stranger); anyone else gets an Answer saying why it was
// refused. Both MACs cover both fresh challenges, so a recorded handshake cannot be replayed, and
// their roles differ, so one side's proof cannot be reflected back as the other's.
#pragma once

#include "auth.hpp"

#include <cstdint>
#include <string>

namespace occl::transport {

constexpr uint32_t kHandshakeMagic = 0x4f434c48;  // "OCLH"
constexpr uint32_t kHandshakeVersion = 3;
constexpr uint32_t kHelloHoldsKey = 1;  // Hello::flags

struct Hello {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  int32_t size;
  uint32_t flags;
  uint32_t pid;        // as its rank published it
  Nonce secret;        // the group's
  Nonce member_nonce;  // as its rank published it
  Nonce challenge;
};

struct Challenge {
  uint32_t magic;
  Nonce challenge;
};

struct Proof {
  Mac mac;
};

enum class Verdict : uint32_t {
  Accepted = 1,
  KeyRequired,    // the acceptor holds a key, the connector none
  KeyUnexpected,  // the connector holds a key, the acceptor none
  KeyRejected,    // the connector's proof does not match the acceptor's key
  RankTaken,      // another process joined the acceptor as this rank already
  NotAnnounced,   // not the process that its rank's entry in the store describes
};

struct Answer {
  uint32_t magic;
  Verdict verdict;
  int32_t rank;  // the acceptor's
  Nonce secret;
  Mac mac;
};

static_assert(sizeof(Hello) == 72 && sizeof(Challenge) == 20 && sizeof(Proof) == 32 &&
              sizeof(Answer) == 60, "the handshake's wire format");

// Ends the errors about a process that took a rank's place: without a key, anyone who read the
// store could have sent what the real rank sends.
constexpr const char* kImpostorHint =
    " (someone who read the group's secret in the store; set OCCL_AUTH_KEY to keep them out)";

// The MACs (zero without a key) cover everything both ends said and where the connector found
// the acceptor: its entry in the store (`acceptor_record`, as the connector read it and as the
// acceptor wrote it), so a relay at an address someone wrote into the store fails the check.
Mac connector_proof(const AuthKey* key, const std::string& channel,
                    const std::string& acceptor_record, int acceptor, const Hello& hello,
                    const Nonce& acceptor_challenge);
// The acceptor's also covers its verdict.
Mac acceptor_proof(const AuthKey* key, const std::string& channel,
                   const std::string& acceptor_record, int acceptor, const Hello& hello,
                   const Nonce& acceptor_challenge, Verdict verdict);

// Whether the acceptor gives `verdict` only once the connector's proof matched; such an Answer
// carries the acceptor's proof. (Refusals for the key cannot: the two share no key.)
bool verdict_after_proof(Verdict verdict);

// Why the acceptor refused the connector, in words for the connector's error.
std::string refusal_reason(Verdict verdict, int acceptor, int connector);

}  // namespace occl::transport
