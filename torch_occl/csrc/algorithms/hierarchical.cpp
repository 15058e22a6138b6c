#include "hierarchical.hpp"

#include "ring.hpp"
#include "single_copy.hpp"

#include "../transport/peer_memory.hpp"
#include "../tuning.hpp"

#include <algorithm>

namespace occl::algorithms::hierarchical {
namespace {

// hosts[h]: host h's ranks, ascending.
std::vector<std::vector<int>> ranks_by_host(const Mesh& mesh) {
  std::vector<std::vector<int>> hosts;
  for (int r = 0; r < static_cast<int>(mesh.hosts().size()); ++r) {
    const int host = mesh.hosts()[r];
    if (host >= static_cast<int>(hosts.size())) hosts.resize(host + 1);
    hosts[host].push_back(r);
  }
  return hosts;
}

// This rank's two rings: its host's ranks, and the ranks at its place on every host.
struct Levels {
  std::vector<std::vector<int>> hosts;  // ranks_by_host
  Ring within;
  Ring across;

  explicit Levels(const Mesh& mesh) : hosts(ranks_by_host(mesh)) {
    const int host = mesh.hosts()[mesh.rank()];
    const std::vector<int>& neighbours = hosts[host];
    const int place = static_cast<int>(
        std::find(neighbours.begin(), neighbours.end(), mesh.rank()) - neighbours.begin());
    within = {neighbours, place};
    across = {{}, host};
    for (const auto& ranks : hosts) across.ranks.push_back(ranks[place]);
  }
  int place() const { return within.position; }
};

}  // namespace

bool applies(const Mesh& mesh) {
  if (!Tuning::get().hierarchical || mesh.hosts().size() != static_cast<size_t>(mesh.size())) {
    return false;
  }
  const auto hosts = ranks_by_host(mesh);
  if (hosts.size() < 2 || hosts[0].size() < 2) return false;
  return std::all_of(hosts.begin(), hosts.end(),
                     [&](const std::vector<int>& ranks) { return ranks.size() == hosts[0].size(); });
}

void allreduce(Mesh& mesh, char* data, size_t count, Reduction reduction, Deadline deadline) {
  const Levels levels(mesh);
  const size_t element = kernels::element_size(reduction.dtype);
  const Segments shares = Segments::even(count, levels.within.size());
  char* share = data + shares.begin(levels.place()) * element;
  ring_reduce_scatter(mesh, levels.within, {data, data, share}, shares, reduction, deadline);
  ring_allreduce(mesh, levels.across, share,
                 Segments::even(shares.count(levels.place()), levels.across.size()), reduction,
                 deadline);
  ring_allgather(mesh, levels.within, data, shares, element, deadline);
}

void broadcast(Mesh& mesh, char* data, size_t bytes, int root, Deadline deadline) {
  const Levels levels(mesh);
  const int root_host = mesh.hosts()[root];
  const int places = levels.within.size();
  const int place = levels.place();
  const Segments shares = Segments::even(bytes, places);
  // Every share in as many pieces, the last ones of a smaller share possibly empty, so that the
  // ranks of a host step through them together.
  const size_t chunk = std::max<size_t>(1, Tuning::get().pipeline_chunk_bytes);
  const size_t largest_share = (bytes + places - 1) / places;
  const size_t pieces = (largest_share + chunk - 1) / chunk;
  auto piece = [&](int owner, size_t k) {
    const size_t begin = std::min(k * chunk, shares.count(owner));
    return std::make_pair(shares.begin(owner) + begin,
                          std::min((k + 1) * chunk, shares.count(owner)) - begin);
  };
  // Across hosts, from the root's host on: one chain a place, all at once, a TCP stream each
  // (between two network namespaces, two streams carried 32 MiB each in 11-17 ms, one stream
  // 64 MiB in 25-36). The same pieces cross whether or not a host copies with host memory.
  const Ring across = levels.across.from(levels.hosts[root_host][place]);
  // Within a host: single copies where its ranks may, else rings.
  const transport::PeerMemory* memory = mesh.host_memory();
  const auto buffers = memory ? single_copy::share(mesh, *memory, levels.within, data, bytes,
                                                   deadline)
                              : std::vector<transport::PeerBuffer>{};
  if (across.position == 0) {
    // The root's host: each rank takes its share from the root piece by piece, sending each
    // on as it has it, then takes the rest; or, through rings, takes all before it sends.
    const bool taking = mesh.rank() != root && memory;
    if (!memory) chain_broadcast(mesh, levels.within.from(root), data, bytes, deadline);
    for (size_t k = 0; k < pieces; ++k) {
      const auto [offset, size] = piece(place, k);
      if (taking) buffers[root].read(offset, data + offset, size);
      mesh.exchange({{across.next(), data + offset, size}}, {}, deadline);
    }
    if (!memory) return;
    if (taking) {
      buffers[root].read(0, data, shares.begin(place));
      buffers[root].read(shares.begin(place + 1), data + shares.begin(place + 1),
                         bytes - shares.begin(place + 1));
    }
    return barrier(mesh, levels.within, deadline);
  }
  // Another host: at step k each rank takes in piece k of its share and passes piece k-1 on
  // along its chain. With host memory it also tells its host's other ranks that it has piece
  // k-1, hears the same from them, and copies their pieces k-1 out of their buffers; without,
  // the shares go round a ring at the end.
  const bool passes_on = across.position < across.size() - 1;
  for (size_t k = 0; k <= pieces; ++k) {
    std::vector<transport::SendOp> sends;
    std::vector<transport::RecvOp> recvs;
    if (k < pieces) {
      const auto [offset, size] = piece(place, k);
      recvs.push_back({across.previous(), data + offset, size});
    }
    if (k > 0) {
      const auto [offset, size] = piece(place, k - 1);
      if (passes_on) sends.push_back({across.next(), data + offset, size});
      for (int rank : levels.within.ranks) {
        if (rank == mesh.rank() || !memory) continue;
        sends.push_back({rank, nullptr, 0});
        recvs.push_back({rank, nullptr, 0});
      }
    }
    if (!sends.empty() || !recvs.empty()) mesh.exchange(sends, recvs, deadline);
    if (k == 0 || !memory) continue;
    for (int i = 1; i < places; ++i) {
      const int other = (place + i) % places;
      const auto [offset, size] = piece(other, k - 1);
      buffers[levels.within.ranks[other]].read(offset, data + offset, size);
    }
  }
  if (!memory) return ring_allgather(mesh, levels.within, data, shares, 1, deadline);
  barrier(mesh, levels.within, deadline);
}

void allgather(Mesh& mesh, char* data, size_t block_bytes, Deadline deadline) {
  const Levels levels(mesh);
  const int hosts = levels.across.size();
  const int places = levels.within.size();
  // Across hosts, the blocks of the ranks at this place; then within the host, each place's.
  std::vector<std::vector<size_t>> across(hosts), within(places);
  for (int h = 0; h < hosts; ++h) {
    across[h].push_back(levels.hosts[h][levels.place()] * block_bytes);
    for (int p = 0; p < places; ++p) within[p].push_back(levels.hosts[h][p] * block_bytes);
  }
  ring_allgather_blocks(mesh, levels.across, data, across, block_bytes, deadline);
  ring_allgather_blocks(mesh, levels.within, data, within, block_bytes, deadline);
}

void reduce_scatter(Mesh& mesh, const ReduceBuffers& buffers, size_t block_count,
                    Reduction reduction, Deadline deadline) {
  const Levels levels(mesh);
  const int hosts = levels.across.size();
  const int places = levels.within.size();
  const size_t element = kernels::element_size(reduction.dtype);
  // Within the host, each place's blocks summed over the host, left in `partial`; then across
  // hosts, this rank's block.
  std::vector<std::vector<size_t>> within(places), across(hosts);
  for (int h = 0; h < hosts; ++h) {
    for (int p = 0; p < places; ++p) within[p].push_back(levels.hosts[h][p] * block_count);
    across[h].push_back(levels.hosts[h][levels.place()] * block_count);
  }
  const std::vector<char*> summed_here = [&] {
    std::vector<char*> at;
    for (size_t offset : within[levels.place()]) at.push_back(buffers.partial + offset * element);
    return at;
  }();
  ring_reduce_scatter_blocks(mesh, levels.within, {buffers.input, buffers.partial, nullptr},
                             within, summed_here, block_count, reduction, deadline);
  ring_reduce_scatter_blocks(mesh, levels.across, {buffers.partial, buffers.partial, nullptr},
                             across, {buffers.output}, block_count, reduction, deadline);
}

}  // namespace occl::algorithms::hierarchical
