#include "occl_kit/rendezvous.hpp"

#include <c10/util/Exception.h>

#include <vector>

namespace occl::kit {

void wait_for_members(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, const std::string& what) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("occl_kit/member/" + std::to_string(r));
  store->set(keys[rank], std::vector<uint8_t>{});
  try {
    store->wait(keys, timeout);
  } catch (const c10::Error&) {  // a plain c10::Error from FileStore, DistStoreError from TCPStore
    std::string missing;
    for (int r = 0; r < size; ++r) {
      if (!store->check({keys[r]})) missing += " " + std::to_string(r);
    }
    TORCH_CHECK(false, what, ": rank(s)", missing, " did not join within ", timeout.count(), " ms");
  }
}

}  // namespace occl::kit
