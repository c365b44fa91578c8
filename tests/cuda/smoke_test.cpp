#include <gtest/gtest.h>
#include "kernels/cuda/cuda_ops.h"
TEST(CudaSmoke, Links) { SUCCEED(); }
