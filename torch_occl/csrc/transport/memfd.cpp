#include "memfd.hpp"

#include "socket.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace occl::transport {
namespace {

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string namespace_inode(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 ? std::to_string(st.st_ino) : "?";
}

}  // namespace

int create_memfd(size_t bytes) {
  int fd = ::memfd_create("occl", MFD_CLOEXEC);
  if (fd < 0) throw_system("memfd_create");
  if (::fchmod(fd, 0600) != 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    ::close(fd);
    throw_system("sizing a shared-memory region", err);
  }
  return fd;
}

Mapping map_memfd(int fd, size_t bytes, Access access) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_system("fstat on a shared-memory region");
  if (static_cast<size_t>(st.st_size) != bytes) {
    throw TransportError(TransportError::Kind::Protocol,
                         "a shared-memory region has " + std::to_string(st.st_size) +
                             " bytes, expected " + std::to_string(bytes));
  }
  const int protection = access == Access::ReadOnly ? PROT_READ : PROT_READ | PROT_WRITE;
  void* base = ::mmap(nullptr, bytes, protection, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) throw_system("mmap of a shared-memory region");
  return {base, bytes};
}

Mapping map_peer_memfd(pid_t pid, int fd, size_t bytes, Access access) {
  std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  int own = ::open(path.c_str(), (access == Access::ReadOnly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (own < 0) throw_system("opening " + path);
  try {
    Mapping m = map_memfd(own, bytes, access);
    ::close(own);
    return m;
  } catch (...) {
    ::close(own);
    throw;
  }
}

void unmap(const Mapping& mapping) {
  if (mapping.base) ::munmap(mapping.base, mapping.bytes);
}

std::string host_identity() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  std::ostringstream id;
  id << name << '/' << read_first_line("/proc/sys/kernel/random/boot_id") << "/uid"
     << ::geteuid() << "/pid" << namespace_inode("/proc/self/ns/pid") << "/net"
     << namespace_inode("/proc/self/ns/net");
  if (const char* extra = std::getenv("OCCL_HOST_ID")) id << '/' << extra;
  return id.str();
}

}  // namespace occl::transport
