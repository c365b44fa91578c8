// Vector loops over float rows: the sampler's vocabulary-wide maximum, exp-sums and threshold
// scans over one logits row (~150k floats), which dominate sampling time, and the CPU
// attention's softmax numerators. They use AVX2 (the CPU backend's floor) when compiled for
// it, with scalar loops otherwise.
//
// exp here is a Cephes-style polynomial (about 2 ulp for the arguments seen here, the
// range (-87, 0]); arguments below -87.3 (including -inf) give exactly 0, so a masked
// token never gets weight. Sums are accumulated in double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kite::vec {

struct RowMax {
  float max;                // the largest value; -inf when every value is -inf
  bool has_nan_or_pos_inf;  // the row cannot be sampled from
};
RowMax row_max(std::span<const float> x);

// The first index i with x[i] == value, or x.size() when there is none.
size_t first_index_of(std::span<const float> x, float value);

// sum_i exp((x[i] - shift) * scale). `scale` must be finite and > 0.
double sum_exp(std::span<const float> x, float shift, float scale);

// x[i] = exp(x[i] - shift) in place; returns the sum (the CPU attention's softmax numerators).
double exp_shifted_in_place(std::span<float> x, float shift);

// Block size of the partial sums kept by exp_weights, so a draw skips whole blocks.
inline constexpr size_t kWeightBlock = 512;

// Writes weights[i] = exp((x[i] - shift) * scale) and block_sums[b] = the sum of block b
// (kWeightBlock entries); returns the total. weights.size() must equal x.size().
double exp_weights(std::span<const float> x, float shift, float scale, std::span<float> weights,
                   std::vector<double>& block_sums);

// The index i where the running sum of weights first exceeds target (0 <= target < total),
// found through the block sums; when rounding leaves the target past the end, the last
// index with a positive weight.
size_t draw_index(std::span<const float> weights, const std::vector<double>& block_sums,
                  double target);

// Index of the first element at or after `begin` with x[i] > threshold, or x.size().
size_t next_greater(std::span<const float> x, size_t begin, float threshold);

}  // namespace kite::vec
