// Stored responses (response_store.h).
#include "server/response_store.h"

#include <algorithm>

namespace channel::server {

void ResponseStore::put(Entry e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0) return;
  while (entries_.size() >= capacity_) entries_.pop_front();
  entries_.push_back(std::move(e));
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; });
  if (it == entries_.end()) return std::nullopt;
  return *it;
}

bool ResponseStore::remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

}  // namespace channel::server
