// What the translation units of occl_device._C share: the device's memory (memory.cpp) and its
// devices (guard.cpp). ops.cpp builds the kernels on these, module.cpp exposes them to Python;
// ddp_timer.cpp stands alone.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/StorageImpl.h>

#include <cstddef>

namespace occl_device {

// -- memory.cpp ----------------------------------------------------------------------------------

// OCCL_DEVICE_HOST_ADDRESSABLE (default 1), read once (as _C loads): whether a DataPtr holds the
// host address of its bytes (1) or an address the host cannot dereference (0).
bool host_addressable();
// The host address of the bytes at device address `address` (nullptr stays nullptr): what every
// kernel touches instead of a data_ptr().
void* to_host(const void* address);
// Device memory, on the current device.
c10::Allocator* device_allocator();
// Host memory that tensor.is_pinned() reports as pinned (DDP requires a pinned staging buffer).
c10::Allocator* pinned_allocator();
bool is_pinned(const void* host_address);
// The device of the live allocation that holds device address `address`; an error if none does.
c10::DeviceIndex device_of(const void* address);
// Bytes of device memory allocated and not yet freed, on all devices.
std::size_t memory_allocated();
// Gives `storage` (an occldev storage) `nbytes`, keeping the bytes it had up to that size.
void resize_storage(c10::StorageImpl& storage, std::size_t nbytes);

// -- guard.cpp -----------------------------------------------------------------------------------

// OCCL_DEVICE_COUNT (default 2), read once (as _C loads).
c10::DeviceIndex device_count();
// The calling thread's current device (0 until set).
c10::DeviceIndex current_device();
// Makes `index` the calling thread's current device; an error if no such device exists.
void set_device(long index);
// set_device, returning the device that was current.
c10::DeviceIndex exchange_device(long index);

} // namespace occl_device
