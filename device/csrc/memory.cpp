// occldev's memory: host memory (aligned_alloc) registered as PrivateUse1's allocator, so copies
// to and from the device move real bytes. In the mode where the host cannot address the device
// (OCCL_DEVICE_HOST_ADDRESSABLE=0, like a discrete GPU's memory), a DataPtr holds the host address
// plus kAddressOffset: a non-canonical x86-64 address, so code that dereferences data_ptr() instead
// of going through a kernel faults at once, while pointer arithmetic (storage offsets, views) still
// works. Kernels translate with to_host().
#include "device.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

namespace occl_device {
namespace {

constexpr std::uintptr_t kAddressOffset = std::uintptr_t{1} << 62;
// As c10's CPU allocator: wide enough for any vectorized CPU kernel that runs on the bytes.
constexpr std::size_t kAlignment = 64;

bool read_host_addressable() {
  const char* value = std::getenv("OCCL_DEVICE_HOST_ADDRESSABLE");
  if (value == nullptr || std::strcmp(value, "1") == 0) {
    return true;
  }
  TORCH_CHECK(std::strcmp(value, "0") == 0,
              "OCCL_DEVICE_HOST_ADDRESSABLE must be 0 or 1, not '", value, "'");
  return false;
}

struct Block {
  std::size_t bytes;
  c10::DeviceIndex device;
};

// Live allocations by host address: what memory_allocated() counts, and what finds the allocation
// (and so the device) a pointer into its middle belongs to.
class Registry {
 public:
  void add(const void* base, Block block) {
    const std::lock_guard<std::mutex> lock(mutex_);
    blocks_.emplace(reinterpret_cast<std::uintptr_t>(base), block);
    bytes_ += block.bytes;
  }

  void remove(const void* base) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = blocks_.find(reinterpret_cast<std::uintptr_t>(base));
    bytes_ -= found->second.bytes;
    blocks_.erase(found);
  }

  std::optional<Block> find(const void* address) const {
    const auto key = reinterpret_cast<std::uintptr_t>(address);
    const std::lock_guard<std::mutex> lock(mutex_);
    auto after = blocks_.upper_bound(key);
    if (after == blocks_.begin()) {
      return std::nullopt;
    }
    const auto& [base, block] = *std::prev(after);
    // A zero-byte tensor's pointer may sit at the end of an allocation: still that allocation's.
    if (key > base + block.bytes) {
      return std::nullopt;
    }
    return block;
  }

  std::size_t bytes() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, Block> blocks_;
  std::size_t bytes_ = 0;
};

// Never destroyed: tensors still alive at exit are freed after static destructors have run.
Registry& device_blocks() {
  static auto* registry = new Registry();
  return *registry;
}

Registry& pinned_blocks() {
  static auto* registry = new Registry();
  return *registry;
}

void* host_allocate(std::size_t bytes) {
  // aligned_alloc wants a multiple of the alignment.
  void* host = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  TORCH_CHECK_WITH(OutOfMemoryError, host != nullptr, "occldev: out of memory allocating ", bytes,
                   " bytes");
  return host;
}

void* device_address(void* host) {
  return host_addressable() ? host
                            : reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(host) +
                                                      kAddressOffset);
}

void free_device_block(void* host) {
  device_blocks().remove(host);
  std::free(host);
}

void free_pinned_block(void* host) {
  pinned_blocks().remove(host);
  std::free(host);
}

class DeviceAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t bytes) override {
    return allocate_on(current_device(), bytes);
  }

  // The context is the host address, which is what the deleter frees.
  c10::DataPtr allocate_on(c10::DeviceIndex device, std::size_t bytes) const {
    const c10::Device where(c10::DeviceType::PrivateUse1, device);
    if (bytes == 0) {
      return {nullptr, where};
    }
    void* host = host_allocate(bytes);
    device_blocks().add(host, {bytes, device});
    return {device_address(host), host, &free_device_block, where};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(to_host(dest), to_host(src), count);
  }
};

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t bytes) override {
    const c10::Device where(c10::DeviceType::CPU);
    if (bytes == 0) {
      return {nullptr, where};
    }
    void* host = host_allocate(bytes);
    pinned_blocks().add(host, {bytes, -1});
    return {host, host, &free_pinned_block, where};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

DeviceAllocator& device_allocator_impl() {
  static auto* allocator = new DeviceAllocator();
  return *allocator;
}

} // namespace

bool host_addressable() {
  static const bool value = read_host_addressable();
  return value;
}

void* to_host(const void* address) {
  if (address == nullptr || host_addressable()) {
    return const_cast<void*>(address);
  }
  const auto value = reinterpret_cast<std::uintptr_t>(address);
  TORCH_INTERNAL_ASSERT(value >= kAddressOffset, "occldev: ", address,
                        " is not a device address");
  return reinterpret_cast<void*>(value - kAddressOffset);
}

c10::Allocator* device_allocator() {
  return &device_allocator_impl();
}

c10::Allocator* pinned_allocator() {
  static auto* allocator = new PinnedAllocator();
  return allocator;
}

bool is_pinned(const void* host_address) {
  return pinned_blocks().find(host_address).has_value();
}

c10::DeviceIndex device_of(const void* address) {
  const auto block = device_blocks().find(to_host(address));
  TORCH_CHECK(block.has_value(), "occldev: ", address,
              " is not in any live occldev allocation");
  return block->device;
}

std::size_t memory_allocated() {
  return device_blocks().bytes();
}

void resize_storage(c10::StorageImpl& storage, std::size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "occldev: trying to resize a storage that is not resizable");
  c10::DataPtr resized = device_allocator_impl().allocate_on(storage.device().index(), nbytes);
  const std::size_t kept = std::min(nbytes, storage.nbytes());
  if (kept > 0) {
    std::memcpy(to_host(resized.get()), to_host(storage.data_ptr().get()), kept);
  }
  storage.set_data_ptr_noswap(std::move(resized));
  storage.set_nbytes(nbytes);
}

} // namespace occl_device

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, occl_device::device_allocator())
