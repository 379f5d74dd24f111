#pragma once
// The DLPack exchange structs (https://github.com/dmlc/dlpack, Apache-2.0),
// the subset the module reads and writes: the unversioned DLManagedTensor that
// every producer and consumer speaks (torch 1.13, NumPy 1.24: capsule
// "dltensor"), and DLPack 1.0's versioned one, which carries a read-only flag
// (capsule "dltensor_versioned"). These layouts are a stable C ABI.
#include <cstdint>

namespace phasor::python::dlpack {

// kDLExtDev, DLPack's device type for an extension device, is the CUDA
// simulator's: memory that a consumer must not take for a GPU's (nor for the CPU's).
enum DeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLExtDev = 12 };
enum TypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };

struct Device {
  int32_t device_type;
  int32_t device_id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: compact row-major
  uint64_t byte_offset;
};

struct ManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

struct Version {
  uint32_t major;
  uint32_t minor;
};

constexpr uint64_t kFlagReadOnly = 1;
constexpr uint64_t kFlagIsCopied = 2;

struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

}  // namespace phasor::python::dlpack
