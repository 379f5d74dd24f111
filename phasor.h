#pragma once
// Everything a user of the library needs, in one include.
#include "autograd/functions.h"
#include "autograd/fused.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
