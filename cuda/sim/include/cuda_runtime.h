#pragma once
// The CUDA simulator's cuda_runtime.h: the runtime API and the device model
// (cuda/sim/device.h) for .cu files compiled as host C++.
#include "cuda_runtime_api.h"
#include "../device.h"
