#pragma once
// Test-facing counters of the CUDA simulator (PHASOR_CUDA_SIM): how often the
// host waited for the device, by kind, and how many kernels were launched.
// A GPU training step should launch kernels and never wait (issue #31): tests
// reset the counters before a step and read them after it.
#include <cstdint>

namespace phasor::sim {

struct SyncCounts {
  int64_t d2h_copies = 0;    // device -> host copies (cudaMemcpy, cudaMemcpyAsync): the host reads device memory
  int64_t stream_syncs = 0;  // cudaStreamSynchronize
  int64_t device_syncs = 0;  // cudaDeviceSynchronize, and the calls that wait for the whole device
                             // (cudaMemcpy, cudaMemset, cudaFree, cudaFreeHost, cudaStreamDestroy)
  int64_t event_syncs = 0;   // cudaEventSynchronize
  int64_t queries = 0;       // cudaStreamQuery, cudaEventQuery: the host polls the device's progress
  int64_t launches = 0;      // kernels launched (not a synchronisation)
  // Every kind of host synchronisation together (launches excluded).
  int64_t total() const { return d2h_copies + stream_syncs + device_syncs + event_syncs + queries; }
};

SyncCounts sync_counts();
void reset_sync_counts();

}  // namespace phasor::sim
