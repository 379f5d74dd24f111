#include "tensor/backend.h"

namespace phasor {

namespace {
Backend* backends[2] = {nullptr, nullptr};
}

void register_backend(DeviceType type, Backend* backend) { backends[static_cast<int>(type)] = backend; }

Backend* backend_for(Device device) {
  if (device.is_cpu()) return nullptr;
  Backend* b = backends[static_cast<int>(device.type)];
  PHASOR_CHECK(b != nullptr, "device ", device, " is not available (Phasor was built without CUDA or no GPU is present)");
  return b;
}

// The device that computes: the one device other than the CPU among the tensors.
// A 0-d CPU tensor (a scalar such as the 2 of `x * 2`) may accompany device
// tensors; the backend copies it over. Any other mix is an error.
Backend* device_backend(const char* op, const Tensor& t, std::initializer_list<Tensor> others) {
  Device d = t.device();
  for (const Tensor& o : others)
    if (o.defined() && d.is_cpu() && !o.device().is_cpu() && t.dim() == 0) d = o.device();
  auto fits = [&](const Tensor& o) { return !o.defined() || o.device() == d || (o.device().is_cpu() && o.dim() == 0); };
  PHASOR_CHECK(fits(t), op, ": tensors on different devices (", t.device(), " and ", d, ")");
  for (const Tensor& o : others) PHASOR_CHECK(fits(o), op, ": tensors on different devices (", d, " and ", o.device(), ")");
  return backend_for(d);
}

Tensor to_cpu(const Tensor& t) { return ops::to_device(t, kCPU); }

#ifdef PHASOR_WITH_CUDA
// Linking the CUDA backend (cuda/) registers it here, from an object every
// program links, so a static link cannot drop it; the GPU is touched lazily.
namespace gpu {
void register_cuda();
}
namespace {
const bool cuda_registered = (gpu::register_cuda(), true);
}
#endif

void Backend::unsupported(const char* op) const { fail(op, ": not implemented on ", name()); }

void Backend::copy_(const Tensor&, const Tensor&) { unsupported("copy_"); }
void Backend::fill_(const Tensor&, c128) { unsupported("fill_"); }
Tensor Backend::unary(ops::Unary op, const Tensor&) { unsupported(ops::name(op)); }
Tensor Backend::binary(ops::Binary op, const Tensor&, const Tensor&) { unsupported(ops::name(op)); }
void Backend::binary_(ops::Binary op, const Tensor&, const Tensor&) { unsupported(ops::name(op)); }
void Backend::axpy_(const Tensor&, const Tensor&, double) { unsupported("axpy_"); }
Tensor Backend::compare(ops::Compare, const Tensor&, const Tensor&) { unsupported("compare"); }
Tensor Backend::where(const Tensor&, const Tensor&, const Tensor&) { unsupported("where"); }
Tensor Backend::polar(const Tensor&, const Tensor&) { unsupported("polar"); }
Tensor Backend::complex(const Tensor&, const Tensor&) { unsupported("complex"); }
Tensor Backend::pow_scalar(const Tensor&, double) { unsupported("pow"); }
Tensor Backend::sum(const Tensor&, const std::vector<int64_t>&, bool) { unsupported("sum"); }
ops::ValuesIndices Backend::max(const Tensor&, int64_t, bool) { unsupported("max"); }
ops::ValuesIndices Backend::min(const Tensor&, int64_t, bool) { unsupported("min"); }
Tensor Backend::logsumexp(const Tensor&, int64_t, bool) { unsupported("logsumexp"); }
Tensor Backend::softmax(const Tensor&, int64_t) { unsupported("softmax"); }
Tensor Backend::log_softmax(const Tensor&, int64_t) { unsupported("log_softmax"); }
bool Backend::all_finite(const Tensor&) { unsupported("all_finite"); }
Tensor Backend::matmul(const Tensor&, const Tensor&, MatOp, MatOp) { unsupported("matmul"); }
Tensor Backend::index_select(const Tensor&, int64_t, const Tensor&) { unsupported("index_select"); }
Tensor Backend::index_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { unsupported("index_add"); }
Tensor Backend::gather(const Tensor&, int64_t, const Tensor&) { unsupported("gather"); }
Tensor Backend::scatter_add(const Dims&, int64_t, const Tensor&, const Tensor&) { unsupported("scatter_add"); }
void Backend::fill_uniform_(const Tensor&, double, double, uint64_t, uint64_t) { unsupported("uniform"); }
void Backend::fill_normal_(const Tensor&, double, double, uint64_t, uint64_t) { unsupported("normal"); }
ops::RmsNormResult Backend::rms_norm(const Tensor&, const Tensor&, double) { unsupported("rms_norm"); }
ops::RmsNormGrads Backend::rms_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { unsupported("rms_norm_backward"); }
ops::CrossEntropyResult Backend::cross_entropy(const Tensor&, const Tensor&, int64_t, bool) { unsupported("cross_entropy"); }
Tensor Backend::cross_entropy_backward(double, const Tensor&, const Tensor&, const Tensor&, int64_t, double) {
  unsupported("cross_entropy_backward");
}
Tensor Backend::rotate(const Tensor&, const Tensor&, bool) { unsupported("rotate"); }
Tensor Backend::cmha_rotate(const Tensor&, const ops::CmhaParams&) { unsupported("cmha_rotate"); }
ops::CmhaGrads Backend::cmha_rotate_backward(const Tensor&, const Tensor&, const ops::CmhaParams&) { unsupported("cmha_rotate_backward"); }
Tensor Backend::attention_softmax(const Tensor&, double, int64_t, const Tensor&) { unsupported("attention_softmax"); }
Tensor Backend::attention_softmax_backward(const Tensor&, const Tensor&, double) { unsupported("attention_softmax_backward"); }
void Backend::adamw_step_(const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, double, double, double, double, double,
                          double) {
  unsupported("adamw_step_");
}

}  // namespace phasor
