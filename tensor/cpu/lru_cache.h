#pragma once
// A map that holds at most `capacity` entries: adding one to a full map
// drops the one least recently found or added. Not thread-safe (its user
// locks). The oneDNN primitive cache (onednn_gemm.cpp) is one: a process that
// meets ever new shapes must not keep a primitive for each for good.
#include <algorithm>
#include <cstddef>
#include <list>
#include <unordered_map>
#include <utility>

namespace phasor::cpu {

template <class Key, class Value, class Hash>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

  // The entry for `key`, now the most recently used; null if there is none.
  Value* find(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  // Adds (or replaces) the entry for `key` as the most recently used, first
  // dropping the least recently used one if the map is full.
  Value& insert(const Key& key, Value value) {
    if (auto it = index_.find(key); it != index_.end()) {
      order_.erase(it->second);
      index_.erase(it);
    }
    if (order_.size() >= capacity_) drop_oldest();
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    return order_.front().second;
  }

  // A new capacity (at least 1); entries past it go at once, the least recently used first.
  void set_capacity(size_t capacity) {
    capacity_ = std::max<size_t>(capacity, 1);
    while (order_.size() > capacity_) drop_oldest();
  }

  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  using Entries = std::list<std::pair<Key, Value>>;  // the most recently used first
  void drop_oldest() {
    index_.erase(order_.back().first);
    order_.pop_back();
  }
  size_t capacity_;
  Entries order_;
  std::unordered_map<Key, typename Entries::iterator, Hash> index_;
};

}  // namespace phasor::cpu
