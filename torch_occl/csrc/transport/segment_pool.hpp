// Shared memory the backend hands out on request (c10d's allocateTensor: FSDP2 asks for its
// all-gather and reduce-scatter buffers on every collective of every step), so that the
// single-copy collectives on them copy with memcpy through mappings instead of with the
// kernel's cross-memory copy, as on torch_occl.shared_empty's tensors.
//
// Unlike shared_empty, taking a buffer is not collective: its segment's fd stays open, and a
// peer maps the segment the first time a copy meets it (shared_segments.hpp, map_peer_segment).
// Mapping a segment per call would cost more than the copy saves, so segments are kept and
// reused, like a caching allocator's blocks: a buffer's segment goes back to the pool when the
// buffer is freed, and the pool never returns memory (the peers' mappings would hold it anyway).
#pragma once

#include <cstddef>
#include <memory>

namespace occl::transport {

// At least `bytes` in a pooled segment (a segment that fits, or a new one); the segment goes
// back to the pool when the last copy of the pointer goes. Throws TransportError when a new
// segment cannot be made.
std::shared_ptr<void> take_pooled_buffer(size_t bytes);

// Segments the pool has made so far (the tests read it to tell reuse from growth).
size_t pooled_segments();

}  // namespace occl::transport
