#pragma once
// The gradients of one all-reduce as flat buffers, one per real dtype (each
// complex element two reals): what the MPI and NCCL transports
// (app/distributed_mpi.cpp, app/distributed_nccl.cpp) reduce in buckets.
#include <cstddef>
#include <vector>

#include "tensor/tensor.h"

namespace phasor::distributed {

// Where one gradient's elements live in the flat buffer of its real dtype, and
// the host (or device) tensor that holds them contiguously meanwhile.
struct Piece {
  Tensor grad;     // the caller's gradient (written back at the end)
  Tensor staging;  // contiguous, on the transport's device; == grad when no copy was needed
  size_t offset = 0, count = 0;  // in reals of the flat buffer
};

struct Flat {
  DType dtype;  // Float32 or Float64
  std::vector<Piece> pieces;
  size_t count = 0;
};

// Splits gradients by real dtype, in order; each complex element counts as two reals.
std::vector<Flat> plan_flat(const std::vector<Tensor>& grads, const char* who);

// What every rank's all-reduce must agree on before it moves data (the MPI
// transport's check_counts): the float32 and float64 element counts and the
// bucket size that splits them into MPI or NCCL calls.
std::vector<int64_t> flat_counts(const std::vector<Flat>& flats, size_t bucket_bytes);
// The collectives check_counts tells apart.
constexpr int64_t kAllReduceMean = 1, kAllReduceSum = 2;

}  // namespace phasor::distributed
