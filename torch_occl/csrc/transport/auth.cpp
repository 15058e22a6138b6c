#include "auth.hpp"

#include "socket.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace occl::transport {
namespace {

const char* const kKeyVariable = "OCCL_AUTH_KEY";
const char* const kKeyFileVariable = "OCCL_AUTH_KEY_FILE";
// Anyone who saw a handshake may try keys offline against its MACs: a short key, a word, falls.
// `openssl rand -hex 32` makes a good one.
constexpr size_t kMinKeyBytes = 32;
// A key of fewer different byte values is no secret (40 spaces, 32 zero bytes, "abab..."); a
// random one has many more: `openssl rand -hex 32` gives 64 of 16 hex digits.
constexpr size_t kMinDistinctKeyBytes = 8;
// A key file holds one key; a larger one is a mistake (the wrong path).
constexpr off_t kMaxKeyFileBytes = 4096;

[[noreturn]] void reject(const std::string& why) {
  throw TransportError(TransportError::Kind::System, why);
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The file's contents, refusing a file that anyone but its owner (this user) could read or write.
// The checks are of the file opened (a symlink's target), so it cannot change between them and
// the read.
std::vector<uint8_t> read_key_file(const std::string& path) {
  const std::string what = std::string(kKeyFileVariable) + " (" + path + ")";
  // Non-blocking: a FIFO at the path must not stall init.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_system("cannot open " + what);
  struct stat info {};
  std::vector<uint8_t> key;
  std::string problem;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    problem = what + " is not a regular file";
  } else if (info.st_uid != ::geteuid()) {
    problem = what + " belongs to another user: the key file must be this user's own";
  } else if (info.st_size > kMaxKeyFileBytes) {
    problem = what + " has " + std::to_string(info.st_size) + " bytes: a key file holds one key, " +
              "at most " + std::to_string(kMaxKeyFileBytes) + " bytes";
  } else if ((info.st_mode & 077) != 0) {
    problem = what + " has mode " + mode_text(info.st_mode) +
              ": group or others may access it; the key file must be its owner's alone (chmod 600)";
  } else {
    key.resize(static_cast<size_t>(info.st_size));
    size_t got = 0;
    while (got < key.size()) {
      ssize_t n = ::read(fd, key.data() + got, key.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    key.resize(got);
  }
  ::close(fd);
  if (!problem.empty()) reject(problem);
  // `openssl rand -hex 32 > file` ends the key with a newline that the other ranks' may not have.
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  return key;
}

}  // namespace

Nonce random_nonce() {
  Nonce nonce;
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    reject("OpenSSL's random generator failed");
  }
  return nonce;
}

bool equal_bytes(const void* a, const void* b, size_t bytes) {
  return CRYPTO_memcmp(a, b, bytes) == 0;
}

std::string hex(const Nonce& nonce) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (uint8_t byte : nonce) {
    text += digits[byte >> 4];
    text += digits[byte & 15];
  }
  return text;
}

std::optional<AuthKey> AuthKey::from_env() {
  const char* value = std::getenv(kKeyVariable);
  const char* path = std::getenv(kKeyFileVariable);
  if (value && path) {
    reject(std::string("both ") + kKeyVariable + " and " + kKeyFileVariable +
           " are set; set only one of them");
  }
  if (!value && !path) return std::nullopt;
  std::vector<uint8_t> key =
      value ? std::vector<uint8_t>(value, value + std::strlen(value)) : read_key_file(path);
  if (key.size() < kMinKeyBytes) {
    OPENSSL_cleanse(key.data(), key.size());
    reject(std::string("the key in ") + (value ? kKeyVariable : kKeyFileVariable) +
           " has " + std::to_string(key.size()) + " bytes; it must have at least " +
           std::to_string(kMinKeyBytes) + " (for instance `openssl rand -hex 32`)");
  }
  bool seen[256] = {};
  size_t distinct = 0;
  for (uint8_t byte : key) distinct += !std::exchange(seen[byte], true);
  OPENSSL_cleanse(seen, sizeof(seen));
  if (distinct < kMinDistinctKeyBytes) {
    OPENSSL_cleanse(key.data(), key.size());
    reject(std::string("the key in ") + (value ? kKeyVariable : kKeyFileVariable) +
           " has only " + std::to_string(distinct) +
           " different byte value(s); a key must be random, with at least " +
           std::to_string(kMinDistinctKeyBytes) + " (for instance `openssl rand -hex 32`)");
  }
  return AuthKey(std::move(key));
}

AuthKey::AuthKey(AuthKey&& other) noexcept : key_(std::move(other.key_)) {}

AuthKey::~AuthKey() { OPENSSL_cleanse(key_.data(), key_.size()); }

Mac AuthKey::mac(const std::string& message) const {
  Mac mac{};
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(),
            &length) ||
      length != mac.size()) {
    reject("OpenSSL's HMAC-SHA256 failed");
  }
  return mac;
}

}  // namespace occl::transport
