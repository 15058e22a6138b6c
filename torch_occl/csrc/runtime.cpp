#include "runtime.hpp"

#include "algorithms/hierarchical.hpp"
#include "tuning.hpp"
#include "transport/bootstrap.hpp"
#include "transport/mesh.hpp"
#include "transport/p2p.hpp"
#include "transport/subgroup.hpp"

#include <c10/util/Exception.h>

namespace occl::runtime {
namespace {

// How long a rank that gave up on a collective waits for the kernel to take its reports to the
// other ranks, and, after a timeout, for the reports of the ranks it waited for: a rank that was
// itself waiting for another one says so, and the error names the rank everyone waits for.
constexpr auto kReportFlush = std::chrono::milliseconds(200);
// The latter is longer: a rank that waits too started its op later by as much as it lags.
constexpr auto kPeerReportGrace = std::chrono::seconds(1);
// Where the tags of subgroups' messages on a group's p2p links begin: past every user tag (int).
constexpr int64_t kSubgroupTags = int64_t{1} << 40;

// "group G (rank r of n; global ranks ...)", as the kit's errors name it.
std::string group(const Config& config, int rank, int size) {
  return kit::describe_group(config.group_name, rank, size, config.global_ranks_in_group);
}

}  // namespace

std::unique_ptr<Runtime> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 const Config& config) {
  return std::make_unique<MeshRuntime>(store, rank, size, config);
}

MeshRuntime::MeshRuntime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         const Config& config)
    : where_(group(config, rank, size)) {
  try {
    // Collectives and point-to-point messages travel on links of their own: p2p messages arrive
    // in any order and must never sit in the way of a collective's frames. Collectives between
    // ranks on one host go through shared memory; their sockets then only signal liveness.
    const size_t send_buffer = Tuning::get().loopback_send_buffer_bytes;
    transport::Bootstrap bootstrap(store, rank, size, config.timeout);
    auto collective = bootstrap.connect_group({config.bind_address, "collective", send_buffer});
    auto shm = transport::connect_shared_memory(
        bootstrap, collective, {transport::transport_mode_from_env(), Tuning::get().shm_ring_bytes});
    auto p2p = bootstrap.connect_group({config.bind_address, "p2p", send_buffer});
    start(rank, size, {std::move(collective), std::move(p2p), std::move(shm)});
    bootstrap.finish();
  } catch (const transport::TransportError& e) {
    C10_THROW_ERROR(DistBackendError, "occl: cannot connect " + where_ + ": " + e.what());
  } catch (const c10::DistStoreError& e) {
    C10_THROW_ERROR(DistBackendError, "occl: cannot connect " + where_ +
                                          ", the store failed: " + e.what_without_backtrace());
  }
}

MeshRuntime::MeshRuntime(const kit::Subgroup& subgroup, transport::SubgroupLinks links,
                         const Config& config)
    : where_(group(config, subgroup.rank, subgroup.size())) {
  start(subgroup.rank, subgroup.size(), std::move(links));
}

void MeshRuntime::start(int rank, int size, transport::SubgroupLinks links) {
  // Collectives and point-to-point messages share the region, on rings of their own.
  std::shared_ptr<transport::ShmLinks> shm = std::move(links.shm.links);
  mesh_ = std::make_shared<transport::Mesh>(rank, size, std::move(links.collective), shm,
                                            std::move(links.shm.hosts));
  // Very large messages between ranks that may copy from each other's memory are lent (p2p.hpp).
  std::optional<transport::PeerMemory> peer_memory;
  if (mesh_->peer_memory()) peer_memory = *mesh_->peer_memory();
  p2p_ = std::make_unique<transport::P2PEngine>(
      rank, size, std::move(links.p2p), std::move(shm), std::move(peer_memory),
      Tuning::get().p2p_lend_min_bytes, Tuning::get().single_copy_min_bytes, mesh_->spin(),
      [mesh = std::weak_ptr<transport::Mesh>(mesh_)](int peer, const std::string& report) {
        if (auto alive = mesh.lock()) alive->peer_gave_up(peer, report);
      });
  if (kit::debug_level("occl") >= kit::DebugLevel::Info) log_choices(links.shm.single_copies_off);
}

std::unique_ptr<Runtime> MeshRuntime::split(const kit::Subgroup& subgroup, const Config& config) {
  // Every rank of the group counts every split, members or not, so the tags agree.
  const int64_t tag = kSubgroupTags + 2 * static_cast<int64_t>(splits_++);
  if (!subgroup.includes_me()) return nullptr;
  std::shared_ptr<transport::Mesh> mesh;
  {
    std::lock_guard<std::mutex> lock(mesh_mutex_);
    mesh = mesh_;
  }
  const std::string subgroup_name = group(config, subgroup.rank, subgroup.size());
  TORCH_CHECK(mesh, "occl: cannot split ", where_, " into ", subgroup_name, ": it was shut down");
  try {
    const transport::SubgroupOptions options{
        config.bind_address, Tuning::get().loopback_send_buffer_bytes,
        {transport::transport_mode_from_env(), Tuning::get().shm_ring_bytes}, tag};
    auto links = transport::form_subgroup(*p2p_, *mesh, subgroup.members, options,
                                          transport::Clock::now() + config.timeout);
    return std::unique_ptr<Runtime>(new MeshRuntime(subgroup, std::move(links), config));
  } catch (const transport::TransportError& e) {
    C10_THROW_ERROR(DistBackendError,
                    "occl: cannot split " + where_ + " into " + subgroup_name + ": " + e.what());
  }
}

MeshRuntime::~MeshRuntime() = default;

void MeshRuntime::log_choices(const std::string& single_copies_off) const {
  const std::string& where = where_;
  const Tuning& tuning = Tuning::get();
  kit::debug_log("occl", kit::DebugLevel::Info, where, mesh_->describe());
  kit::debug_log("occl", kit::DebugLevel::Info, where,
                 single_copies_off.empty()
                     ? "single copies on, from " + std::to_string(tuning.single_copy_min_bytes) +
                           " bytes per rank (point-to-point messages as large are lent)"
                     : "single copies off: " + single_copies_off);
  kit::debug_log(
      "occl", kit::DebugLevel::Info, where,
      "allreduce and reduce in one round up to " +
          std::to_string(tuning.direct_allreduce_max_bytes) + " bytes x (ranks - 1), else " +
          (algorithms::hierarchical::applies(*mesh_)
               ? "allreduce, allgather, reduce-scatter and broadcast in two levels across "
                 "hosts, "
               : "") + "a ring in " +
          std::to_string(tuning.pipeline_chunk_bytes) + "-byte pieces; chain broadcast from " +
          std::to_string(tuning.chain_broadcast_min_bytes) + " bytes; rings of " +
          std::to_string(tuning.shm_ring_bytes) + " bytes; loopback send buffer " +
          std::to_string(tuning.loopback_send_buffer_bytes) + " bytes; signature check " +
          (tuning.check_signatures ? "on" : "off"));
}

void MeshRuntime::exchange_signatures(kit::OpContext& ctx, const void* mine, void* everyone,
                                      size_t bytes) {
  mesh_->exchange_records(mine, everyone, bytes, ctx.deadline);
}

transport::Mesh& MeshRuntime::links_for(kit::OpContext& op, bool carry) {
  if (op.agreement == nullptr) return *mesh_;
  kit::Agreement& agreement = *op.agreement;
  if (!carry) {
    agreement.settle();
    return *mesh_;
  }
  mesh_->carry_records(&agreement.record(), agreement.slot(0), sizeof(kit::SignatureRecord),
                       [&agreement] { agreement.check_carried(); });
  return *mesh_;
}

bool MeshRuntime::agreement_enabled() const { return Tuning::get().check_signatures; }

size_t MeshRuntime::deferred_async_max_bytes() const {
  return Tuning::get().deferred_async_max_bytes;
}

void MeshRuntime::close() {
  {
    std::lock_guard<std::mutex> lock(mesh_mutex_);
    if (mesh_) mesh_->give_up();
    mesh_.reset();
  }
  p2p_->close();
}

void MeshRuntime::abort() {
  {
    std::lock_guard<std::mutex> lock(mesh_mutex_);
    if (mesh_) mesh_->abort();
  }
  p2p_->abort();
}

std::string MeshRuntime::gave_up(const std::string& failure, const kit::LinkError& error) {
  mesh_->give_up();  // before the op's error lets the caller reuse its buffers
  if (error.kind() == transport::TransportError::Kind::Aborted) return failure;
  std::string text = failure;
  if (error.kind() == transport::TransportError::Kind::PeerClosed) {
    // A rank gave up on the group before its report of why arrived (it gives up first): the
    // report names the cause.
    for (const auto& [peer, report] :
         mesh_->reports_from(error.awaited(), transport::Clock::now() + kPeerReportGrace)) {
      text += "; rank " + std::to_string(peer) + " reported: " + report;
    }
  }
  p2p_->announce_failure(text, transport::Clock::now() + kReportFlush);
  if (error.kind() != transport::TransportError::Kind::Timeout) return text;
  for (const auto& [peer, report] :
       mesh_->reports_from(error.awaited(), transport::Clock::now() + kPeerReportGrace)) {
    text += "; rank " + std::to_string(peer) + " was waiting too: " + report;
  }
  return text;
}

}  // namespace occl::runtime
