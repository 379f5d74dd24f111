// The simulator's traffic counters (traffic.h), filled by the device model
// (device.cpp) when a launch has run; launches on several streams run on
// several OS threads, hence the lock.
#include "traffic.h"

#include <mutex>

#include "internal.h"

namespace phasor::sim {

namespace {
std::mutex& lock() {
  static std::mutex m;
  return m;
}
std::map<std::string, Traffic>& by_kernel() {
  static auto* m = new std::map<std::string, Traffic>();  // never destroyed: kernels may run during static destruction
  return *m;
}
}  // namespace

void record_traffic(const char* launch_name, int64_t bytes_read, int64_t bytes_written, int64_t accesses) {
  std::string name(launch_name);
  name = name.substr(0, name.find('<'));  // "cmha_kernel<R>" -> "cmha_kernel"
  std::lock_guard<std::mutex> g(lock());
  Traffic& t = by_kernel()[name];
  ++t.launches;
  t.bytes_read += bytes_read;
  t.bytes_written += bytes_written;
  t.accesses += accesses;
}

std::map<std::string, Traffic> traffic() {
  std::lock_guard<std::mutex> g(lock());
  return by_kernel();
}

void reset_traffic() {
  std::lock_guard<std::mutex> g(lock());
  by_kernel().clear();
}

}  // namespace phasor::sim
