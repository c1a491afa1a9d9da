// The colour-weighted median of a map at chosen pixels: the compiled form of
// crossview/geometry/edge_weighted_median.py's weighted_median_at (its docstring has the
// definition), with the same numbers.
//
// Pixel p's window holds the samples at offsets (dy, dx), dy and dx in -radius, -radius + step,
// ..., radius (y-major: sample k = iy * side + ix), coordinates clamped to the map (the border
// repeats). Sample j weighs weight_of[|I_j - I_p|_1] (the colour difference summed over the
// three channels, 0..765). Per channel the samples are ordered by value, equal values by k, NaN
// last; their weights are summed in that order in float32; the median is the first value at
// which that sum reaches half of all the weight. One pixel after another: the callers run one
// view per thread.

#include "weighted_median.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace crossview {

namespace {

// Windows of up to this many samples are ordered by counting ranks (branch-free, K^2 compares);
// larger ones by a sort.
constexpr int64_t kRankedSamples = 64;

// The sample's order key: the value's bits made monotonic (every NaN last) above its index in
// the window, so that keys order by value, equal values by index; signed, as AVX2 compares.
int64_t order_key(float value, int64_t index) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint32_t monotonic = std::isnan(value)         ? 0xFFFFFFFFu
                             : (bits & 0x80000000u) != 0 ? ~bits
                                                         : bits | 0x80000000u;
  const uint64_t key = (static_cast<uint64_t>(monotonic) << 32) | static_cast<uint64_t>(index);
  return static_cast<int64_t>(key ^ 0x8000000000000000u);
}

// order[r] = the index of the sample of rank r, for keys [count] (all distinct)
void order_of(const int64_t* keys, int64_t count, int32_t* order, int64_t* scratch) {
  if (count <= kRankedSamples) {
    for (int64_t k = 0; k < count; ++k) {
      int64_t rank = 0;
      for (int64_t j = 0; j < count; ++j) rank += keys[j] < keys[k];
      order[rank] = static_cast<int32_t>(k);
    }
    return;
  }
  std::copy(keys, keys + count, scratch);
  std::sort(scratch, scratch + count);
  for (int64_t r = 0; r < count; ++r) order[r] = static_cast<int32_t>(scratch[r] & 0xFFFFFFFFu);
}

}  // namespace

at::Tensor weighted_median(const at::Tensor& values_in, const at::Tensor& image_in,
                           const at::Tensor& pixels_in, int64_t radius, int64_t step,
                           const at::Tensor& weight_of_in) {
  TORCH_CHECK(values_in.dim() == 3 && values_in.scalar_type() == at::kFloat,
              "weighted_median: values must be [H, W, C] float32");
  TORCH_CHECK(image_in.dim() == 3 && image_in.size(0) == values_in.size(0) &&
                  image_in.size(1) == values_in.size(1) && image_in.size(2) == 3 &&
                  image_in.scalar_type() == at::kByte,
              "weighted_median: image must be [H, W, 3] uint8, the size of values");
  TORCH_CHECK(pixels_in.dim() == 1 && pixels_in.scalar_type() == at::kLong,
              "weighted_median: pixels must be [n] int64");
  TORCH_CHECK(weight_of_in.dim() == 1 && weight_of_in.size(0) == 3 * 255 + 1 &&
                  weight_of_in.scalar_type() == at::kFloat,
              "weighted_median: weight_of must be [766] float32");
  TORCH_CHECK(radius >= 0 && step >= 1, "weighted_median: need radius >= 0 and step >= 1");
  const at::Tensor values = values_in.contiguous(), image = image_in.contiguous(),
                   pixels = pixels_in.contiguous(), weight_of_t = weight_of_in.contiguous();
  const int64_t height = values.size(0), width = values.size(1), channels = values.size(2);
  const int64_t count = pixels.size(0);
  const float* value_at = values.data_ptr<float>();
  const uint8_t* colour_at = image.data_ptr<uint8_t>();
  const int64_t* pixel_at = pixels.data_ptr<int64_t>();
  const float* weight_of = weight_of_t.data_ptr<float>();
  for (int64_t i = 0; i < count; ++i) {
    TORCH_CHECK(pixel_at[i] >= 0 && pixel_at[i] < height * width,
                "weighted_median: a pixel index lies outside the map");
  }
  at::Tensor out = at::empty({count, channels}, values.options());
  float* out_at = out.data_ptr<float>();

  const int64_t side = 2 * radius / step + 1;  // samples per row of the window
  const int64_t samples = side * side;
  std::vector<int64_t> sample_at(samples);  // the window's sample positions
  std::vector<float> weight(samples);
  std::vector<int64_t> keys(samples), scratch(samples);
  std::vector<int32_t> order(samples);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t y = pixel_at[i] / width, x = pixel_at[i] % width;
    const uint8_t* centre = colour_at + 3 * pixel_at[i];
    for (int64_t iy = 0; iy < side; ++iy) {
      const int64_t sy = std::clamp<int64_t>(y - radius + iy * step, 0, height - 1);
      for (int64_t ix = 0; ix < side; ++ix) {
        const int64_t sx = std::clamp<int64_t>(x - radius + ix * step, 0, width - 1);
        const int64_t k = iy * side + ix, at = sy * width + sx;
        const uint8_t* colour = colour_at + 3 * at;
        const int difference = std::abs(colour[0] - centre[0]) +
                               std::abs(colour[1] - centre[1]) + std::abs(colour[2] - centre[2]);
        sample_at[k] = at;
        weight[k] = weight_of[difference];
      }
    }
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t k = 0; k < samples; ++k) {
        keys[k] = order_key(value_at[sample_at[k] * channels + c], k);
      }
      order_of(keys.data(), samples, order.data(), scratch.data());
      float total = 0.0f;
      for (int64_t r = 0; r < samples; ++r) total += weight[order[r]];
      const float half = 0.5f * total;
      float cumulative = 0.0f;
      int64_t median_at = order[samples - 1];
      for (int64_t r = 0; r < samples; ++r) {
        cumulative += weight[order[r]];
        if (!(cumulative < half)) {
          median_at = order[r];
          break;
        }
      }
      const float median = value_at[sample_at[median_at] * channels + c];
      out_at[i * channels + c] = median;
    }
  }
  return out;
}

}  // namespace crossview
