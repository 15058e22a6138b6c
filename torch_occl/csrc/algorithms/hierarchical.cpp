#include "hierarchical.hpp"

#include "ring.hpp"

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
