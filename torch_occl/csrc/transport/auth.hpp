// The optional key that ranks prove they hold while their group forms, and the random bytes and
// comparisons the handshake needs; all from OpenSSL (libcrypto).
//
// The key comes from outside the store (OCCL_AUTH_KEY, or OCCL_AUTH_KEY_FILE naming a file only
// its owner may read), the same on every rank. Ranks never send it or store it: each proves it
// holds the key with an HMAC-SHA256 over both ends' fresh challenges (handshake.hpp), so a process
// that reads the store cannot join.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace occl::transport {

using Nonce = std::array<uint8_t, 16>;
using Mac = std::array<uint8_t, 32>;

// From the OS's entropy through OpenSSL's generator.
Nonce random_nonce();
// Constant time: how many leading bytes matched does not show in the time taken.
bool equal_bytes(const void* a, const void* b, size_t bytes);
std::string hex(const Nonce& nonce);

class AuthKey {
 public:
  // The key the environment names, or none when neither variable is set. Throws
  // TransportError(System) naming the variable and the rule it breaks (never the key).
  static std::optional<AuthKey> from_env();

  AuthKey(const AuthKey&) = delete;
  AuthKey& operator=(const AuthKey&) = delete;
  AuthKey(AuthKey&& other) noexcept;
  AuthKey& operator=(AuthKey&&) = delete;
  ~AuthKey();  // wipes the key from memory

  Mac mac(const std::string& message) const;  // HMAC-SHA256

 private:
  explicit AuthKey(std::vector<uint8_t> key) : key_(std::move(key)) {}
  std::vector<uint8_t> key_;
};

}  // namespace occl::transport
