// Quantized linear: the op behind Linear when its weight is a QuantizedWeight.
//
// y[M,N] = act(x · diag(input_scale))[M,K] · W[N,K]^T (+ bias[N]) where W is what the codes
// decode to and act() is the activation quantization of the format (see
// quant/quantized_weight.h): FP8 per token (kFp8PerChannel), FP8 per token per 128-channel
// group (kFp8Block), INT8 per token (kInt8PerChannel), none (kInt4Group, W4A16).
//
// The CPU implementation (kernels/cpu/quant_linear.cpp) computes in fp32: quantize-dequantize
// the activations, dequantize the weight a tile of rows at a time, then one BLAS GEMM per
// tile. It equals the integer/FP8 kernels' result up to fp32 summation order (the products of
// the decoded values are the same), so it is the reference the CUDA kernels are tested against.
// Shapes as ops::linear; throws std::invalid_argument on a shape mismatch.
#pragma once

#include "core/tensor.h"
#include "quant/quantized_weight.h"

namespace kite::ops {

void quantized_linear(const Tensor& x, const QuantizedWeight& weight, const Tensor* bias,
                      Tensor& y);

}  // namespace kite::ops
