#include "occl_kit/rendezvous.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <vector>

namespace occl::kit {

namespace {

// How much longer than a monitored barrier's timeout the other ranks wait for rank 0's answer.
constexpr std::chrono::milliseconds kAnswerGrace{5000};

// Whether every key is set within `timeout` (a plain c10::Error from FileStore, DistStoreError from
// TCPStore when it is not).
bool arrives(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<std::string>& keys,
             std::chrono::milliseconds timeout) {
  try {
    store->wait(keys, std::max(timeout, std::chrono::milliseconds(1)));
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

[[noreturn]] void fail(const std::string& message) { C10_THROW_ERROR(DistBackendError, message); }

}  // namespace

void wait_for_members(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, const std::string& what) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("occl_kit/member/" + std::to_string(r));
  store->set(keys[rank], std::vector<uint8_t>{});
  if (arrives(store, keys, timeout)) return;
  std::string missing;
  for (int r = 0; r < size; ++r) {
    if (!store->check({keys[r]})) missing += " " + std::to_string(r);
  }
  TORCH_CHECK(false, what, ": rank(s)", missing, " did not join within ", timeout.count(), " ms");
}

void monitored_barrier(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, bool wait_all_ranks, uint64_t index,
                       const std::string& what) {
  if (size == 1) return;
  const std::string prefix = "occl_kit/monitored_barrier/" + std::to_string(index) + "/";
  const std::string answer = prefix + "answer";
  if (rank != 0) {
    store->set(prefix + std::to_string(rank), std::vector<uint8_t>{});
    // Rank 0 answers at most `timeout` after it arrived, which may be later than this rank did.
    const auto wait = timeout + kAnswerGrace;
    if (!arrives(store, {answer}, wait)) {
      fail(what + ": rank " + std::to_string(rank) + " passed monitoredBarrier, but rank 0 did" +
           " not answer within " + std::to_string(wait.count()) + " ms");
    }
    const auto words = store->get(answer);
    store->set(prefix + "read/" + std::to_string(rank), std::vector<uint8_t>{});
    if (!words.empty()) fail(what + ": rank 0 says: " + std::string(words.begin(), words.end()));
    return;
  }
  std::vector<std::string> reports;
  for (int r = 1; r < size; ++r) reports.push_back(prefix + std::to_string(r));
  std::vector<int> arrived, missing;
  if (wait_all_ranks) {
    const bool all = arrives(store, reports, timeout);
    for (int r = 1; r < size; ++r) {
      (all || store->check({reports[r - 1]}) ? arrived : missing).push_back(r);
    }
  } else {  // up to the first rank, in rank order, whose report is not there by the deadline
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int r = 1; r < size && missing.empty(); ++r) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      (arrives(store, {reports[r - 1]}, left) ? arrived : missing).push_back(r);
    }
  }
  std::string failure;
  if (!missing.empty()) {
    failure = missing.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < missing.size(); ++i) {
      failure += (i ? ", " : "") + std::to_string(missing[i]);
    }
    failure += " failed to pass monitoredBarrier in " + std::to_string(timeout.count()) + " ms";
  }
  store->set(answer, std::vector<uint8_t>(failure.begin(), failure.end()));
  // Rank 0 may host the store: it stays until the ranks it saw arrive have read the answer.
  std::vector<std::string> read;
  for (int r : arrived) read.push_back(prefix + "read/" + std::to_string(r));
  arrives(store, read, kAnswerGrace);
  if (!failure.empty()) fail(what + ": " + failure);
}

}  // namespace occl::kit
