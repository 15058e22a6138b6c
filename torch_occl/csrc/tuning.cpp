#include "tuning.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace occl {
namespace {

template <typename T>
void override_from_env(const char* name, T& value) {
  const char* text = std::getenv(name);
  if (!text || !*text) return;
  try {
    value = static_cast<T>(std::stoull(text));
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string(name) + " is '" + text + "', expected a number");
  }
}

}  // namespace

const Tuning& Tuning::get() {
  static const Tuning tuning = [] {
    Tuning t;
    override_from_env("OCCL_DIRECT_ALLREDUCE_MAX_BYTES", t.direct_allreduce_max_bytes);
    override_from_env("OCCL_CHAIN_BROADCAST_MIN_BYTES", t.chain_broadcast_min_bytes);
    override_from_env("OCCL_PIPELINE_CHUNK_BYTES", t.pipeline_chunk_bytes);
    override_from_env("OCCL_SINGLE_COPY_MIN_BYTES", t.single_copy_min_bytes);
    override_from_env("OCCL_P2P_LEND_MIN_BYTES", t.p2p_lend_min_bytes);
    override_from_env("OCCL_SHM_RING_BYTES", t.shm_ring_bytes);
    override_from_env("OCCL_LOOPBACK_SEND_BUFFER_BYTES", t.loopback_send_buffer_bytes);
    override_from_env("OCCL_SPIN_US", t.spin_us);
    override_from_env("OCCL_DEFERRED_ASYNC_MAX_BYTES", t.deferred_async_max_bytes);
    override_from_env("OCCL_CHECK_SIGNATURES", t.check_signatures);
    override_from_env("OCCL_HIERARCHICAL", t.hierarchical);
    override_from_env("OCCL_WIDE_LOOPS_MIN_BYTES", t.wide_loops_min_bytes);
    override_from_env("OCCL_FLOAT16_LANES", t.float16_lanes);
    override_from_env("OCCL_BFLOAT16_LANES", t.bfloat16_lanes);
    if (t.pipeline_chunk_bytes == 0) t.pipeline_chunk_bytes = 1;
    return t;
  }();
  return tuning;
}

}  // namespace occl
