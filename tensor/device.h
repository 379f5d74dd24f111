#pragma once
#include <ostream>
#include <string>

namespace phasor {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  friend bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
  friend bool operator!=(Device a, Device b) { return !(a == b); }
};
inline constexpr Device kCPU{DeviceType::CPU, 0};
inline Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }

inline std::ostream& operator<<(std::ostream& os, Device d) {
  return d.is_cpu() ? (os << "cpu") : (os << "cuda:" << d.index);
}

}  // namespace phasor
