// occldev's devices: how many (OCCL_DEVICE_COUNT), which one is current (per thread, as CUDA's),
// and torch's two ways in: the device guard (c10::DeviceGuard in kernels, streams and events of
// torch.Stream/torch.Event and DDP's reducer) and the PrivateUse1 hooks (torch.accelerator,
// pinned memory, storage resizing). Every kernel has finished when it returns, so there is
// nothing for streams and events to order: each device has one stream, waiting is immediate, and
// an event keeps only the time it was recorded at, for elapsed_time.
#include "device.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace occl_device {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
// Well inside a DeviceIndex (int8_t); each device is only a label on host memory.
constexpr long kMaxDevices = 64;

c10::DeviceIndex read_device_count() {
  const char* value = std::getenv("OCCL_DEVICE_COUNT");
  if (value == nullptr) {
    return 2;
  }
  char* end = nullptr;
  const long count = std::strtol(value, &end, 10);
  TORCH_CHECK(*value != '\0' && *end == '\0' && count >= 0 && count <= kMaxDevices,
              "OCCL_DEVICE_COUNT must be a whole number from 0 to ", kMaxDevices, ", not '",
              value, "'");
  return static_cast<c10::DeviceIndex>(count);
}

// For the callers that must not throw: a bad OCCL_DEVICE_COUNT has already failed the import.
c10::DeviceIndex device_count_or_zero() noexcept {
  try {
    return device_count();
  } catch (...) {
    return 0;
  }
}

thread_local c10::DeviceIndex current = 0;

void check_device(long index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "occldev:", index,
              " does not exist: this process has ", static_cast<int>(device_count()),
              " occldev device(s) (OCCL_DEVICE_COUNT)");
}

c10::Stream stream_of(c10::Device device) {
  return c10::Stream(c10::Stream::DEFAULT,
                     c10::Device(kType, device.has_index() ? device.index() : current));
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class GuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override {
    return kType;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    return {kType, exchange_device(device.index())};
  }

  c10::Device getDevice() const override {
    return {kType, current};
  }

  void setDevice(c10::Device device) const override {
    set_device(device.index());
  }

  // Guards restore with this the device that was current, which exists.
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    current = device.index();
  }

  c10::Stream getStream(c10::Device device) const override {
    return stream_of(device);
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return stream_of(device);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*high_priority*/) const override {
    return stream_of(device);
  }

  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    return stream_of(device);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return stream_of(stream.device());
  }

  bool queryStream(const c10::Stream& /*stream*/) const override {
    return true;
  }

  void synchronizeStream(const c10::Stream& /*stream*/) const override {}

  void synchronizeDevice(c10::DeviceIndex /*device_index*/) const override {}

  void record(void** event, const c10::Stream& /*stream*/, c10::DeviceIndex /*device_index*/,
              c10::EventFlag /*flag*/) const override {
    if (*event == nullptr) {
      *event = new std::int64_t();
    }
    *static_cast<std::int64_t*>(*event) = now_ns();
  }

  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}

  bool queryEvent(void* /*event*/) const override {
    return true;
  }

  void synchronizeEvent(void* /*event*/) const override {}

  void destroyEvent(void* event, c10::DeviceIndex /*device_index*/) const noexcept override {
    delete static_cast<std::int64_t*>(event);
  }

  double elapsedTime(void* start, void* end, c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "occldev: both events must be recorded before elapsed_time");
    return static_cast<double>(*static_cast<std::int64_t*>(end) -
                               *static_cast<std::int64_t*>(start)) /
           1e6;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count_or_zero();
  }
};

class Hooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return device_count_or_zero() > 0;
  }

  // Nothing to initialize: a device that exists is ready.
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return device_index >= 0 && device_index < device_count_or_zero();
  }

  void init() const override {}

  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_device(device);
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current;
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    return {kType, device_of(data)};
  }

  bool isPinnedPtr(const void* data) const override {
    return is_pinned(data);
  }

  at::Allocator* getPinnedMemoryAllocator() const override {
    return pinned_allocator();
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage(*storage.unsafeGetStorageImpl(), newsize);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl)

const bool hooks_registered = (at::RegisterPrivateUse1HooksInterface(new Hooks()), true);

} // namespace

c10::DeviceIndex device_count() {
  static const c10::DeviceIndex count = read_device_count();
  return count;
}

c10::DeviceIndex current_device() {
  return current;
}

void set_device(long index) {
  check_device(index);
  current = static_cast<c10::DeviceIndex>(index);
}

c10::DeviceIndex exchange_device(long index) {
  const c10::DeviceIndex previous = current;
  set_device(index);
  return previous;
}

} // namespace occl_device
