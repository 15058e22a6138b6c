#include "handshake.hpp"

namespace occl::transport {

Mac handshake_mac(const AuthKey* key, Role role, const std::string& channel, const Hello& hello,
                  int acceptor, const Nonce& acceptor_challenge) {
  if (!key) return Mac{};
  std::string transcript = role == Role::Connector ? "occl connect" : "occl accept";
  transcript += '\0' + channel + '\0' + std::to_string(acceptor) + '\0';
  transcript.append(reinterpret_cast<const char*>(&hello), sizeof(hello));
  transcript.append(reinterpret_cast<const char*>(acceptor_challenge.data()),
                    acceptor_challenge.size());
  return key->mac(transcript);
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
                  "every rank)";
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
