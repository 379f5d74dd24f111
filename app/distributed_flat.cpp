#include "app/distributed_flat.h"

#include "tensor/error.h"

namespace phasor::distributed {

// Splits gradients by real dtype, in order; each complex element counts as two reals.
std::vector<Flat> plan_flat(const std::vector<Tensor>& grads, const char* who) {
  std::vector<Flat> flats;
  for (const Tensor& g : grads) {
    PHASOR_CHECK(g.defined(), who, ": undefined gradient");
    const DType rd = real_dtype(g.dtype());
    PHASOR_CHECK(rd == DType::Float32 || rd == DType::Float64, who, ": gradients must be float or complex, got ", g.dtype());
    Flat* f = nullptr;
    for (Flat& x : flats)
      if (x.dtype == rd) f = &x;
    if (f == nullptr) f = &flats.emplace_back(Flat{rd, {}, 0});
    const size_t n = static_cast<size_t>(g.numel()) * (is_complex(g.dtype()) ? 2 : 1);
    f->pieces.push_back(Piece{g, Tensor(), f->count, n});
    f->count += n;
  }
  return flats;
}

std::vector<int64_t> flat_counts(const std::vector<Flat>& flats, size_t bucket_bytes) {
  std::vector<int64_t> counts{0, 0, static_cast<int64_t>(bucket_bytes)};
  for (const Flat& f : flats) counts[f.dtype == DType::Float32 ? 0 : 1] = static_cast<int64_t>(f.count);
  return counts;
}

}  // namespace phasor::distributed
