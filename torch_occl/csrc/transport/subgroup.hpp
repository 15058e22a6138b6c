// Forms a subgroup of a group whose links are up, without a store (torch's split_group).
//
// What the members must tell each other (where each listens, a fresh nonce per listener, the
// shared-memory region) travels on the group's point-to-point links, between members only; the
// other ranks of the group take no part. The subgroup then gets links and a shared-memory region
// of its own, so its ops never wait behind the group's nor mix with them.
//
// The group's links were authenticated as the group formed (bootstrap.hpp) and no store ever
// holds a subgroup's nonces, so a connection to a member's new listener need only present the
// nonce that member sent: anything else is dropped. No generations, no impostor checks.
#pragma once

#include "mesh.hpp"
#include "p2p.hpp"
#include "shm.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace occl::transport {

struct SubgroupOptions {
  std::string bind_address;               // where this rank's new listeners bind
  size_t loopback_send_buffer_bytes = 0;  // as LinkOptions
  ShmOptions shm;
  // Of the subgroup's messages on the group's p2p links: the same on every member, and used by
  // nothing else (user tags are 32-bit).
  int64_t tag = 0;
};

struct SubgroupLinks {
  std::vector<Socket> collective;  // [subgroup rank], as Bootstrap::connect_group
  std::vector<Socket> p2p;
  SharedMemory shm;
};

// `members`: the group's ranks that form the subgroup, ascending, this rank among them. Every
// member calls it with the same members and tag before `deadline`.
SubgroupLinks form_subgroup(P2PEngine& group_p2p, const Mesh& group,
                            const std::vector<int>& members, const SubgroupOptions& options,
                            Deadline deadline);

}  // namespace occl::transport
