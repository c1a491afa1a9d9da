// The colour-weighted median of a map at chosen pixels (weighted_median.cpp), bound in module.cpp.
#pragma once

#include <torch/extension.h>

namespace crossview {

// values [H, W, C] float32, image [H, W, 3] uint8, pixels [n] int64 (y * W + x),
// weight_of [766] float32 (the weight of a colour difference 0..765) -> [n, C] float32
at::Tensor weighted_median(const at::Tensor& values, const at::Tensor& image,
                           const at::Tensor& pixels, int64_t radius, int64_t step,
                           const at::Tensor& weight_of);

}  // namespace crossview
