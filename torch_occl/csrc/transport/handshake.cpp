#include "handshake.hpp"

namespace occl::transport {

namespace {

Mac proof(const AuthKey* key, const char* role, const std::string& channel,
          const std::string& acceptor_record, int acceptor, const Hello& hello,
          const Nonce& acceptor_challenge, const std::string& suffix) {
  if (!key) return Mac{};
  std::string transcript = role;
  for (const std::string& field : {channel, std::to_string(acceptor), acceptor_record}) {
    transcript += '\0' + field;
  }
  transcript += '\0';
  transcript.append(reinterpret_cast<const char*>(&hello), sizeof(hello));
  transcript.append(reinterpret_cast<const char*>(acceptor_challenge.data()),
                    acceptor_challenge.size());
  return key->mac(transcript + suffix);
}

}  // namespace

Mac connector_proof(const AuthKey* key, const std::string& channel,
                    const std::string& acceptor_record, int acceptor, const Hello& hello,
                    const Nonce& acceptor_challenge) {
  return proof(key, "occl connect", channel, acceptor_record, acceptor, hello, acceptor_challenge,
               "");
}

Mac acceptor_proof(const AuthKey* key, const std::string& channel,
                   const std::string& acceptor_record, int acceptor, const Hello& hello,
                   const Nonce& acceptor_challenge, Verdict verdict) {
  const std::string code(reinterpret_cast<const char*>(&verdict), sizeof(verdict));
  return proof(key, "occl accept", channel, acceptor_record, acceptor, hello, acceptor_challenge,
               code);
}

bool verdict_after_proof(Verdict verdict) {
  return verdict == Verdict::Accepted || verdict == Verdict::RankTaken ||
         verdict == Verdict::NotAnnounced;
}

std::string refusal_reason(Verdict verdict, int acceptor, int connector) {
  const std::string by = "rank " + std::to_string(acceptor) + " refused rank " +
                         std::to_string(connector) + ": ";
  switch (verdict) {
    case Verdict::Accepted:
      break;
    case Verdict::KeyRequired:
      return by + "rank " + std::to_string(acceptor) +
             " requires a key (OCCL_AUTH_KEY or OCCL_AUTH_KEY_FILE) and rank " +
             std::to_string(connector) + " has none";
    case Verdict::KeyUnexpected:
      return by + "rank " + std::to_string(connector) + " holds a key and rank " +
             std::to_string(acceptor) + " none; set the same key on every rank";
    case Verdict::KeyRejected:
      return by + "their keys differ (OCCL_AUTH_KEY or OCCL_AUTH_KEY_FILE must be the same on "
                  "every rank), or someone changed rank " + std::to_string(acceptor) +
             "'s address in the store";
    case Verdict::RankTaken:
      return by + "another process joined it as rank " + std::to_string(connector) + " first" +
             kImpostorHint;
    case Verdict::NotAnnounced:
      return by + "it is not the process that rank " + std::to_string(connector) +
             "'s entry in the store describes";
  }
  return by + "verdict " + std::to_string(static_cast<uint32_t>(verdict)) + " (unknown)";
}

}  // namespace occl::transport
