// Every knob that trades speed for something else, in one place, read once from the environment.
//
// The defaults come from the measurements in docs/PERFORMANCE.md (2-core machine, 2 and 4 ranks).
// README ("Tuning") lists the variables.
#pragma once

#include <cstddef>

namespace occl {

struct Tuning {
  // allreduce and reduce while bytes x (ranks - 1) stays within this: every rank sends its buffer
  // to every other (or to the root) and reduces locally, one round; above it: ring
  // reduce-scatter (+ allgather).
  // OCCL_DIRECT_ALLREDUCE_MAX_BYTES
  size_t direct_allreduce_max_bytes = 64 * 1024;
  // broadcast from this many bytes on, to more than two ranks: a pipelined chain through every
  // rank instead of the root sending to each. OCCL_CHAIN_BROADCAST_MIN_BYTES
  size_t chain_broadcast_min_bytes = 512 * 1024;
  // Ring steps move their segment in pieces of at most this many bytes and reduce each piece as it
  // arrives, so the reduction reads cache-hot data. OCCL_PIPELINE_CHUNK_BYTES
  size_t pipeline_chunk_bytes = 256 * 1024;
  // From this many bytes per rank on, groups whose ranks may copy straight from each other's
  // memory (transport/peer_memory.hpp) run the single-copy algorithms instead of passing the data
  // through shared-memory rings; alltoall applies it to each slice. Point-to-point messages this
  // large wait up to 1 ms in a TCP socket for their receive (transport/p2p.hpp).
  // OCCL_SINGLE_COPY_MIN_BYTES
  size_t single_copy_min_bytes = 256 * 1024;
  // Point-to-point messages this large between ranks that may copy from each other's memory are
  // lent (the receiver copies them out of the sender's memory) instead of streamed through a
  // ring: a ping-pong of 1-16 MiB ran 1.3-1.8x faster through the ring, with both sides copying
  // at once, than lent. OCCL_P2P_LEND_MIN_BYTES
  size_t p2p_lend_min_bytes = 64 * 1024 * 1024;
  // Capacity of one shared-memory ring (one direction between two ranks). OCCL_SHM_RING_BYTES
  size_t shm_ring_bytes = 1024 * 1024;
  // SO_SNDBUF of TCP links between ranks on one host (0 leaves it to the kernel, which grows it to
  // megabytes). Loopback TCP copies each byte twice, into the kernel and out of it: a small queue
  // keeps the bytes in cache between the two copies. OCCL_LOOPBACK_SEND_BUFFER_BYTES
  size_t loopback_send_buffer_bytes = 256 * 1024;
  // Microseconds a rank whose transfers stopped moving spins (yielding now and then) before it
  // sleeps on its doorbell or in poll(); also how long a thread waiting for a point-to-point op
  // reads the rings itself (transport/p2p.hpp). Ranks that outnumber the cores never spin: their
  // peers need the core. OCCL_SPIN_US
  int spin_us = 200;
  // An asynchronous collective (async_op=True, the functional collectives) reading or writing at
  // most this many bytes is run by the thread that waits for it rather than by the group's
  // worker, which is not woken for it: on a VM the wake costs about 10 us and takes a core a peer
  // needs, more than such an op gains by starting early (kit::Runtime::deferred_async_max_bytes).
  // OCCL_DEFERRED_ASYNC_MAX_BYTES
  size_t deferred_async_max_bytes = 64 * 1024;
  // Every collective first checks that all ranks call the same one (occl_kit/signature.hpp).
  // Turn off only to measure its cost; every rank must use the same value. OCCL_CHECK_SIGNATURES
  bool check_signatures = true;
  // allreduce, allgather, reduce-scatter and broadcast over a group spanning hosts with as many
  // ranks on each run in two levels (algorithms/hierarchical.hpp). Off only to measure the flat rings
  // beside them; every rank must use the same value. OCCL_HIERARCHICAL
  bool hierarchical = true;
  // Reduction loops over at least this many bytes run in AVX-512's 512-bit vectors where the
  // CPU has them, smaller ones in AVX2's (kernels/reduce.cpp; float16 and bfloat16 by their
  // lanes below). Any value gives the same bits, so ranks may differ. OCCL_WIDE_LOOPS_MIN_BYTES
  size_t wide_loops_min_bytes = 256 * 1024;
  // The widest float16 instructions the reduction kernel uses (kernels/reduce.cpp): 32 lanes
  // (AVX512-FP16's arithmetic, for sums and products of two sources), 16 (AVX-512's
  // conversions), 8 (F16C's) or 1 (c10's portable code), each only where the CPU has it. Every
  // width gives the same bits, so ranks may differ; below 32 only to check that.
  // OCCL_FLOAT16_LANES
  int float16_lanes = 32;
  // The same for bfloat16: 32 lanes (AVX512-BF16) or 1 (c10's portable code, which the
  // compiler vectorises). OCCL_BFLOAT16_LANES
  int bfloat16_lanes = 32;

  static const Tuning& get();
};

}  // namespace occl
