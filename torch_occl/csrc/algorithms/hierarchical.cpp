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
  const auto hosts = ranks_by_host(mesh);
  const int host = mesh.hosts()[mesh.rank()];
  const std::vector<int>& neighbours = hosts[host];
  const int place = static_cast<int>(
      std::find(neighbours.begin(), neighbours.end(), mesh.rank()) - neighbours.begin());
  const Ring within{neighbours, place};
  Ring across{{}, host};
  for (const auto& ranks : hosts) across.ranks.push_back(ranks[place]);

  const size_t element = kernels::element_size(reduction.dtype);
  const Segments shares = Segments::even(count, within.size());
  char* share = data + shares.begin(place) * element;
  ring_reduce_scatter(mesh, within, {data, data, share}, shares, reduction, deadline);
  ring_allreduce(mesh, across, share, Segments::even(shares.count(place), across.size()),
                 reduction, deadline);
  ring_allgather(mesh, within, data, shares, element, deadline);
}

}  // namespace occl::algorithms::hierarchical
