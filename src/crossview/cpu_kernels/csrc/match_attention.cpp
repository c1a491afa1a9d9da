// Fused CPU kernels for MatchAttention (window attention with BilinearSoftmax).
//
// Layout (all contiguous, heads-last): q [B, Hq, Wq, h, C], k [B, Hk, Wk, h, C],
// v [B, Hk, Wk, h, Cv], rel_pos [B, Hq, Wq, h or 1, 2] (x, y). The semantics are those of
// crossview/attention/match/reference.py; these kernels never gather windows into tensors:
// each query works on a few small per-thread buffers of (2r+2)^2 scores.
//
// Forward: one task per query position (b, y, x), looping over heads (so a rel_pos shared by
// the heads gets its gradient summed in a fixed order). Sums over channels run in SIMD
// registers of the target's own width (see Simd below).
// Backward: pass 1 recomputes each query's window, writes grad_q and grad_rel_pos and keeps
// the score gradients and mixed weights of its (2r+2)^2 keys; pass 2 gathers, for every key, the
// contributions of the queries whose window covers it, found through a counting sort of the
// windows by their origin. Every sum runs in an order that does not depend on the thread count.

#include "match_attention.h"

#include <torch/extension.h>

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

// Corners whose max score lies further than this below the window's max use their own shift,
// so their exponentials never underflow.
constexpr double kShiftLimit = 40.0;
constexpr int64_t kChunk = 32;

struct Shape {
  int64_t batch, hq, wq, heads, channels, hk, wk, cv, rel_heads, radius, side, window;
  bool l1;
  double scale;
};

Shape shape_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
               const at::Tensor& rel_pos, int64_t radius, bool l1, double scale) {
  TORCH_CHECK(q.dim() == 5 && k.dim() == 5 && v.dim() == 5 && rel_pos.dim() == 5,
              "match_attention: q, k, v, rel_pos must be 5-D");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type() &&
                  q.scalar_type() == rel_pos.scalar_type(),
              "match_attention: q, k, v, rel_pos must share one dtype");
  Shape s{q.size(0), q.size(1), q.size(2), q.size(3), q.size(4), k.size(1), k.size(2),
          v.size(4), rel_pos.size(3), radius, 2 * radius + 2, 0, l1, scale};
  s.window = s.side * s.side;
  TORCH_CHECK(k.size(0) == s.batch && k.size(3) == s.heads && k.size(4) == s.channels &&
                  v.size(0) == s.batch && v.size(1) == s.hk && v.size(2) == s.wk &&
                  v.size(3) == s.heads,
              "match_attention: k, v shapes do not match q");
  TORCH_CHECK(rel_pos.size(0) == s.batch && rel_pos.size(1) == s.hq && rel_pos.size(2) == s.wq &&
                  (s.rel_heads == 1 || s.rel_heads == s.heads) && rel_pos.size(4) == 2,
              "match_attention: rel_pos shape does not match q");
  TORCH_CHECK(radius >= 0 && s.side <= s.hk && s.side <= s.wk,
              "match_attention: radius too large for the key map");
  return s;
}

// The clamped window of one query: origin of the expanded window, fractional part of the
// centre, and whether the clamp left each coordinate alone (then its gradient passes).
template <typename acc_t>
struct Window {
  int64_t origin_x, origin_y;
  acc_t fx, fy;
  bool free_x, free_y;
};

template <typename acc_t>
inline void clamp_axis(acc_t centre, int64_t extent, int64_t radius, int64_t& origin,
                       acc_t& frac, bool& free) {
  const acc_t lo = static_cast<acc_t>(radius);
  const acc_t hi = static_cast<acc_t>(static_cast<double>(extent - 1 - radius) - 1e-3);
  free = centre >= lo && centre <= hi;
  centre = centre > lo ? centre : lo;  // also maps NaN to lo: indices stay in bounds
  centre = centre < hi ? centre : hi;
  const acc_t corner = std::floor(centre);
  frac = centre - corner;
  origin = static_cast<int64_t>(corner) - radius;
}

template <typename acc_t, typename scalar_t>
inline Window<acc_t> window_at(const scalar_t* rel, int64_t x, int64_t y, const Shape& s) {
  Window<acc_t> w;
  clamp_axis<acc_t>(static_cast<acc_t>(rel[0]) + static_cast<acc_t>(x), s.wk, s.radius,
                    w.origin_x, w.fx, w.free_x);
  clamp_axis<acc_t>(static_cast<acc_t>(rel[1]) + static_cast<acc_t>(y), s.hk, s.radius,
                    w.origin_y, w.fy, w.free_y);
  return w;
}

// SIMD registers through the GCC/Clang vector extension, as wide as the build's target really
// has them (-march=native): 64 bytes with AVX-512, 32 with AVX/AVX2, 16 otherwise. A vector type
// wider than the target's registers has no machine mode: GCC keeps it on the stack and lowers
// some operations on it lane by lane (the compare of `x < 0 ? -x : x` became 16 scalar
// compares and blends). That is what made these kernels 4-5x slower on AVX2-only CPUs when
// every vector here was 64 bytes wide (perf: stack loads and vcmpltss/vblendvps in the L1 loop).
#if defined(__AVX512F__)
constexpr int kRegBytes = 64;
#elif defined(__AVX__)
constexpr int kRegBytes = 32;
#else
constexpr int kRegBytes = 16;
#endif

// A sum over channels runs a block of 64 bytes (16 floats or 8 doubles) at a time: kParts
// registers whose lanes are separate partial sums, reduced at the end by one fixed tree of
// halves (lane_sum). The block, not the register, sets the order of the sum, so AVX-512 and
// AVX2 builds give the same bits (an SSE-only build differs where the others fuse multiply-adds).
template <typename acc_t>
struct Simd {
  typedef acc_t reg __attribute__((vector_size(kRegBytes)));
  static constexpr int kWidth = kRegBytes / sizeof(acc_t);  // lanes of one register
  static constexpr int kParts = 64 / kRegBytes;              // registers of one block
  static constexpr int kBlock = kWidth * kParts;              // lanes of one block
};
template <typename acc_t>
using reg_t = typename Simd<acc_t>::reg;

template <typename acc_t>
struct Block {
  reg_t<acc_t> part[Simd<acc_t>::kParts];
};

template <typename acc_t, typename scalar_t>
__attribute__((always_inline)) inline reg_t<acc_t> load(const scalar_t* p) {
  reg_t<acc_t> out;
  if constexpr (std::is_same_v<acc_t, scalar_t>) {
    std::memcpy(&out, p, sizeof(out));
  } else {
    for (int l = 0; l < Simd<acc_t>::kWidth; ++l) out[l] = static_cast<acc_t>(p[l]);
  }
  return out;
}

template <typename acc_t>
__attribute__((always_inline)) inline void store(const reg_t<acc_t>& value, acc_t* p) {
  std::memcpy(p, &value, sizeof(value));
}

// |x| by clearing the sign bits: one AND, at any width.
template <typename acc_t>
__attribute__((always_inline)) inline reg_t<acc_t> absolute(reg_t<acc_t> x) {
  using bits_t = std::conditional_t<sizeof(acc_t) == 4, int32_t, int64_t>;
  typedef bits_t bits __attribute__((vector_size(kRegBytes)));
  return reinterpret_cast<reg_t<acc_t>>(reinterpret_cast<bits>(x) &
                                        std::numeric_limits<bits_t>::max());
}

// A float block's 16 lanes v[0..16) are summed by one fixed tree, whatever the register width:
// a[i] = v[i] + v[i+8], then ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])),
// an order that four keys' sums can share (lane_sums4). A double block (8 lanes): a[i] = v[i] +
// v[i+4], then (a[0] + a[2]) + (a[1] + a[3]). (Templates, so that only the branch of this
// build's width is compiled.)
typedef float f4 __attribute__((vector_size(16)));
typedef float f8 __attribute__((vector_size(32)));

// [x0 + x1, x2 + x3, y0 + y1, y2 + y3] (SSE3's haddps).
__attribute__((always_inline)) inline f4 pair_sums(f4 x, f4 y) {
  return __builtin_shufflevector(x, y, 0, 2, 4, 6) + __builtin_shufflevector(x, y, 1, 3, 5, 7);
}

// The halves a[0..4) and a[4..8) of a float block (a template only so that the branches of
// other register widths are not compiled).
template <typename T>
__attribute__((always_inline)) inline void halves(const Block<T>& v, f4& lo, f4& hi) {
  constexpr int kParts = Simd<float>::kParts;
  if constexpr (kParts == 4) {
    lo = v.part[0] + v.part[2];
    hi = v.part[1] + v.part[3];
  } else {
    f8 a;
    if constexpr (kParts == 1) {
      const auto& x = v.part[0];
      a = __builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7) +
          __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15);
    } else {
      a = v.part[0] + v.part[1];
    }
    lo = __builtin_shufflevector(a, a, 0, 1, 2, 3);
    hi = __builtin_shufflevector(a, a, 4, 5, 6, 7);
  }
}

template <typename acc_t>
__attribute__((always_inline)) inline acc_t lane_sum(const Block<acc_t>& v) {
  if constexpr (std::is_same_v<acc_t, float>) {
    f4 lo, hi;
    halves(v, lo, hi);
    const f4 p = pair_sums(lo, hi);  // a0+a1, a2+a3, a4+a5, a6+a7
    return (p[0] + p[1]) + (p[2] + p[3]);
  } else {
    constexpr int kParts = Simd<double>::kParts;
    if constexpr (kParts == 4) {  // registers of 2 lanes: a = (p0 + p2, p1 + p3)
      const auto lo = v.part[0] + v.part[2], hi = v.part[1] + v.part[3];
      return (lo[0] + hi[0]) + (lo[1] + hi[1]);
    } else {
      typedef double d4 __attribute__((vector_size(32)));
      d4 a;
      if constexpr (kParts == 1) {
        const auto& x = v.part[0];
        a = __builtin_shufflevector(x, x, 0, 1, 2, 3) + __builtin_shufflevector(x, x, 4, 5, 6, 7);
      } else {
        a = v.part[0] + v.part[1];
      }
      return (a[0] + a[2]) + (a[1] + a[3]);
    }
  }
}

// lane_sum of four float blocks at once, the pairwise sums of all four sharing each shuffle.
__attribute__((always_inline)) inline f4 lane_sums4(const Block<float> (&v)[4]) {
  f4 lo[4], hi[4];
  for (int i = 0; i < 4; ++i) halves(v[i], lo[i], hi[i]);
  // pair_sums(pair_sums(x0, x1), pair_sums(x2, x3))[i] = (x_i0 + x_i1) + (x_i2 + x_i3)
  const f4 low = pair_sums(pair_sums(lo[0], lo[1]), pair_sums(lo[2], lo[3]));
  const f4 high = pair_sums(pair_sums(hi[0], hi[1]), pair_sums(hi[2], hi[3]));
  return low + high;
}

// Negative L1 distances (kL1) or dot products of the channel vector `a` with kKeys vectors,
// key i at b + i * stride, n channels each, into out[0..kKeys). The keys share every load of
// `a`, and their independent sums keep the SIMD units busy. Each key's sum runs in the same
// order as if it were computed alone.
template <int kKeys, bool kL1, typename acc_t, typename scalar_t>
__attribute__((always_inline)) inline void similarities(const scalar_t* a, const scalar_t* b,
                                                        int64_t stride, int64_t n, acc_t* out) {
  constexpr int kWidth = Simd<acc_t>::kWidth, kParts = Simd<acc_t>::kParts;
  constexpr int kBlock = Simd<acc_t>::kBlock;
  Block<acc_t> sums[kKeys] = {};
  int64_t c = 0;
  for (; c + kBlock <= n; c += kBlock) {
    for (int p = 0; p < kParts; ++p) {
      const reg_t<acc_t> x = load<acc_t>(a + c + p * kWidth);
      for (int i = 0; i < kKeys; ++i) {
        const reg_t<acc_t> y = load<acc_t>(b + i * stride + c + p * kWidth);
        if constexpr (kL1) {
          sums[i].part[p] += absolute<acc_t>(x - y);
        } else {
          sums[i].part[p] += x * y;
        }
      }
    }
  }
  acc_t totals[kKeys];
  if constexpr (kKeys == 4 && std::is_same_v<acc_t, float>) {
    const f4 four = lane_sums4(sums);
    for (int i = 0; i < 4; ++i) totals[i] = four[i];
  } else {
    for (int i = 0; i < kKeys; ++i) totals[i] = lane_sum(sums[i]);
  }
  for (int i = 0; i < kKeys; ++i) {
    acc_t total = totals[i];
    for (int64_t t = c; t < n; ++t) {
      const acc_t x = static_cast<acc_t>(a[t]), y = static_cast<acc_t>(b[i * stride + t]);
      total += kL1 ? std::abs(x - y) : x * y;
    }
    out[i] = kL1 ? -total : total;
  }
}

// The similarity of one pair of channel vectors.
template <typename acc_t, typename scalar_t>
__attribute__((always_inline)) inline acc_t similarity(const scalar_t* a, const scalar_t* b,
                                                       int64_t n, bool l1) {
  acc_t out;
  if (l1) {
    similarities<1, true>(a, b, 0, n, &out);
  } else {
    similarities<1, false>(a, b, 0, n, &out);
  }
  return out;
}

// Scores of `count` keys of one window row (key i at row + i * stride) against query qp, in
// groups that share the query's loads.
template <bool kL1, typename acc_t, typename scalar_t>
__attribute__((always_inline)) inline void row_similarities(const scalar_t* qp,
                                                            const scalar_t* row, int64_t stride,
                                                            int64_t count, int64_t n,
                                                            acc_t* out) {
  int64_t i = 0;
  for (; i + 4 <= count; i += 4) similarities<4, kL1>(qp, row + i * stride, stride, n, out + i);
  for (; i + 2 <= count; i += 2) similarities<2, kL1>(qp, row + i * stride, stride, n, out + i);
  for (; i < count; ++i) similarities<1, kL1>(qp, row + i * stride, stride, n, out + i);
}

// Calls f with the window side as a compile-time constant for the common radii 1..3 (so the
// window loops unroll), or 0 (read it from the Shape at run time).
template <typename F>
void with_side(int64_t side, const F& f) {
  switch (side) {
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    default: f(std::integral_constant<int, 0>{});
  }
}

// Runs f(begin, end) over [0, total) in chunks handed out dynamically to torch's threads: a
// thread the OS descheduled on a busy machine does not hold up the others. Every chunk's
// result is independent of which thread runs it.
template <typename F>
void parallel_chunks(int64_t total, int64_t chunk, const F& f) {
  std::atomic<int64_t> next{0};
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), (total + chunk - 1) / chunk);
  at::parallel_for(0, std::max<int64_t>(threads, 1), 1, [&](int64_t, int64_t) {
    for (int64_t begin = next.fetch_add(chunk); begin < total; begin = next.fetch_add(chunk)) {
      f(begin, std::min(total, begin + chunk));
    }
  });
}

template <typename acc_t>
inline acc_t sign(acc_t value) {
  return static_cast<acc_t>((value > 0) - (value < 0));
}

// Calls f(j) for every key j of corner c's sub-window (c: 0 nw, 1 ne, 2 sw, 3 se).
template <int kSide, typename F>
inline void for_corner(const Shape& s, int c, F f) {
  const int64_t side = kSide > 0 ? kSide : s.side;
  const int64_t sub = side - 1;
  for (int64_t dy = c >> 1; dy < (c >> 1) + sub; ++dy) {
    for (int64_t dx = c & 1; dx < (c & 1) + sub; ++dx) f(dy * side + dx);
  }
}

// Sum of per-corner values over the corners whose sub-window holds key (dy, dx).
template <typename acc_t>
inline acc_t over_corners(int64_t dy, int64_t dx, int64_t side, const acc_t (&value)[4]) {
  const bool left = dx < side - 1, right = dx >= 1;
  const acc_t top = (left ? value[0] : acc_t(0)) + (right ? value[1] : acc_t(0));
  const acc_t bottom = (left ? value[2] : acc_t(0)) + (right ? value[3] : acc_t(0));
  return (dy < side - 1 ? top : acc_t(0)) + (dy >= 1 ? bottom : acc_t(0));
}

// exp(x) for a register of floats: the single-precision polynomial of Cephes' expf (within
// 2 ulp of the correctly rounded value), a register at a time; glibc's expf is one call per
// lane and took a tenth of the forward. x = n ln2 + r with n = round(x / ln2) (by adding
// 1.5 * 2^23, which leaves n in the low mantissa bits), exp(r) by a polynomial on
// |r| <= ln2 / 2, times 2^n built in the exponent bits. x is clamped to [-87.3, 88.3] so that
// 2^n stays a normal float: below -87.3 the result is exp(-87.3) ~ 1e-38 instead of a denormal
// or 0 (the kernels only take exp(score - max score), where such terms are nothing beside the
// max's 1). NaN passes through.
inline reg_t<float> exp_reg(reg_t<float> x) {
  typedef int32_t ireg __attribute__((vector_size(kRegBytes)));
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  constexpr int32_t kMagicBits = 0x4B400000;
  x = x < -87.3f ? reg_t<float>{} - 87.3f : x;
  x = x > 88.3f ? reg_t<float>{} + 88.3f : x;
  const reg_t<float> t = x * 1.44269504088896341f + kMagic;
  const reg_t<float> n = t - kMagic;
  const ireg ni = reinterpret_cast<ireg>(t) - kMagicBits;
  const reg_t<float> r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  reg_t<float> y = 1.9875691500e-4f * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  return y * reinterpret_cast<reg_t<float>>((ni + 127) << 23);
}

// out[j] = exp(score[j] - top) for j < count (a multiple of the register width for floats).
template <typename acc_t>
inline void exponentials(const acc_t* score, acc_t top, int64_t count, acc_t* out) {
  if constexpr (std::is_same_v<acc_t, float>) {
    constexpr int kWidth = Simd<float>::kWidth;
    for (int64_t j = 0; j < count; j += kWidth) {
      store<float>(exp_reg(load<float>(score + j) - top), out + j);
    }
  } else {
    for (int64_t j = 0; j < count; ++j) out[j] = std::exp(score[j] - top);
  }
}

// Per-thread scratch for one query's expanded window and its BilinearSoftmax.
//
// Usually ("shared" shift) every corner's softmax uses the window's max score `top`:
// p_c(j) = expo[j] * inv_sum[c] with expo[j] = exp(score[j] - top), one exponential per key.
// A corner whose own max lies more than kShiftLimit below `top` would underflow; then that
// corner uses its own shift and recomputes its exponentials.
template <typename acc_t>
struct Scratch {
  std::vector<acc_t> score, expo, attn, coef;
  acc_t weight[4], shift[4], inv_sum[4], top;
  bool shared;

  // Padded to whole registers (zeros), so the exponentials run a register at a time.
  explicit Scratch(int64_t window)
      : score(padded(window)), expo(padded(window)), attn(padded(window)), coef(padded(window)) {}

  static int64_t padded(int64_t window) {
    constexpr int64_t kWidth = Simd<acc_t>::kWidth;
    return (window + kWidth - 1) / kWidth * kWidth;
  }

  // Probability of key j in the softmax of corner c (j inside that corner's sub-window).
  inline acc_t prob(int c, int64_t j) const {
    const acc_t e = shift[c] == top ? expo[j] : std::exp(score[j] - shift[c]);
    return e * inv_sum[c];
  }
};

// Scores of the expanded window of query `qp` (keys of head-row pointer `k_head`), then the four
// sub-window softmaxes mixed with the bilinear weights into `sc.attn`. With a shared shift,
// `sc.coef[j]` is sum over the corners c holding j of weight[c] * inv_sum[c].
template <int kSide, typename scalar_t, typename acc_t>
void mix_window(const scalar_t* qp, const scalar_t* k_head, const Window<acc_t>& w,
                const Shape& s, Scratch<acc_t>& sc) {
  const int64_t side = kSide > 0 ? kSide : s.side, window = side * side;
  const int64_t key_stride = s.heads * s.channels;
  for (int64_t dy = 0; dy < side; ++dy) {
    const scalar_t* row = k_head + ((w.origin_y + dy) * s.wk + w.origin_x) * key_stride;
    acc_t* score = sc.score.data() + dy * side;
    if (s.l1) {
      row_similarities<true>(qp, row, key_stride, side, s.channels, score);
    } else {
      row_similarities<false>(qp, row, key_stride, side, s.channels, score);
    }
  }
  for (int64_t j = 0; j < window; ++j) sc.score[j] *= static_cast<acc_t>(s.scale);
  acc_t corner_max[4];
  for (int c = 0; c < 4; ++c) {
    acc_t m = -std::numeric_limits<acc_t>::infinity();
    for_corner<kSide>(s, c, [&](int64_t j) { m = std::max(m, sc.score[j]); });
    corner_max[c] = m;
  }
  sc.top = std::max(std::max(corner_max[0], corner_max[1]), std::max(corner_max[2], corner_max[3]));
  exponentials(sc.score.data(), sc.top, Scratch<acc_t>::padded(window), sc.expo.data());
  sc.weight[0] = (1 - w.fx) * (1 - w.fy);
  sc.weight[1] = w.fx * (1 - w.fy);
  sc.weight[2] = (1 - w.fx) * w.fy;
  sc.weight[3] = w.fx * w.fy;
  sc.shared = true;
  for (int c = 0; c < 4; ++c) {
    const bool own = sc.top - corner_max[c] > static_cast<acc_t>(kShiftLimit);
    sc.shift[c] = own ? corner_max[c] : sc.top;
    sc.shared = sc.shared && !own;
    sc.inv_sum[c] = 1;
    acc_t total = 0;
    for_corner<kSide>(s, c, [&](int64_t j) { total += sc.prob(c, j); });
    sc.inv_sum[c] = 1 / total;
  }
  if (sc.shared) {
    const acc_t scaled[4] = {sc.weight[0] * sc.inv_sum[0], sc.weight[1] * sc.inv_sum[1],
                             sc.weight[2] * sc.inv_sum[2], sc.weight[3] * sc.inv_sum[3]};
    for (int64_t dy = 0; dy < side; ++dy) {
      for (int64_t dx = 0; dx < side; ++dx) {
        const int64_t j = dy * side + dx;
        sc.coef[j] = over_corners(dy, dx, side, scaled);
        sc.attn[j] = sc.expo[j] * sc.coef[j];
      }
    }
    return;
  }
  std::fill(sc.attn.begin(), sc.attn.end(), acc_t(0));
  for (int c = 0; c < 4; ++c) {
    for_corner<kSide>(s, c, [&](int64_t j) { sc.attn[j] += sc.weight[c] * sc.prob(c, j); });
  }
}

// acc[r * kWidth + l] = sum over the window's keys j of weight[j] * v_j[l] for kRegs registers
// of channels at `origin` (the window's first key): keys outer, so the kRegs accumulators stay
// in registers and their independent chains of FMAs overlap.
template <int kSide, int kRegs, typename scalar_t, typename acc_t>
__attribute__((always_inline)) inline void aggregate_regs(const scalar_t* origin,
                                                          int64_t row_stride,
                                                          int64_t key_stride, int64_t side,
                                                          const acc_t* weight, acc_t* acc) {
  constexpr int kWidth = Simd<acc_t>::kWidth;
  reg_t<acc_t> total[kRegs] = {};
  for (int64_t dy = 0; dy < side; ++dy) {
    for (int64_t dx = 0; dx < side; ++dx) {
      const acc_t wj = weight[dy * side + dx];
      const scalar_t* p = origin + dy * row_stride + dx * key_stride;
      for (int r = 0; r < kRegs; ++r) total[r] += wj * load<acc_t>(p + r * kWidth);
    }
  }
  for (int r = 0; r < kRegs; ++r) store<acc_t>(total[r], acc + r * kWidth);
}

// acc[c] = sum over the window's keys j of weight[j] * v_j[c], in the keys' row-major order
// for every channel (the same sum whichever register width holds the channel).
template <int kSide, typename scalar_t, typename acc_t>
void aggregate(const scalar_t* v_head, const Window<acc_t>& w, const Shape& s,
               const acc_t* weight, acc_t* acc) {
  const int64_t side = kSide > 0 ? kSide : s.side;
  constexpr int kWidth = Simd<acc_t>::kWidth;
  const int64_t stride = s.heads * s.cv, row_stride = s.wk * stride;
  const scalar_t* origin = v_head + (w.origin_y * s.wk + w.origin_x) * stride;
  int64_t c = 0;
  for (; c + 8 * kWidth <= s.cv; c += 8 * kWidth) {
    aggregate_regs<kSide, 8>(origin + c, row_stride, stride, side, weight, acc + c);
  }
  if (c + 4 * kWidth <= s.cv) {
    aggregate_regs<kSide, 4>(origin + c, row_stride, stride, side, weight, acc + c);
    c += 4 * kWidth;
  }
  if (c + 2 * kWidth <= s.cv) {
    aggregate_regs<kSide, 2>(origin + c, row_stride, stride, side, weight, acc + c);
    c += 2 * kWidth;
  }
  if (c + kWidth <= s.cv) {
    aggregate_regs<kSide, 1>(origin + c, row_stride, stride, side, weight, acc + c);
    c += kWidth;
  }
  for (; c < s.cv; ++c) {
    acc_t total = 0;
    for (int64_t dy = 0; dy < side; ++dy) {
      const scalar_t* row = origin + dy * row_stride + c;
      for (int64_t dx = 0; dx < side; ++dx) {
        total += weight[dy * side + dx] * static_cast<acc_t>(row[dx * stride]);
      }
    }
    acc[c] = total;
  }
}

template <int kSide, typename scalar_t>
void forward_kernel(const Shape& s, const scalar_t* q, const scalar_t* k, const scalar_t* v,
                    const scalar_t* rel, scalar_t* out, scalar_t* attn_out) {
  const int64_t side = kSide > 0 ? kSide : s.side, window = side * side;
  using acc_t = at::opmath_type<scalar_t>;
  parallel_chunks(s.batch * s.hq * s.wq, kChunk, [&](int64_t begin, int64_t end) {
    Scratch<acc_t> sc(window);
    std::vector<acc_t> acc(s.cv);
    for (int64_t n = begin; n < end; ++n) {
      const int64_t b = n / (s.hq * s.wq), y = (n / s.wq) % s.hq, x = n % s.wq;
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t qh = n * s.heads + h;
        const auto w = window_at<acc_t>(rel + (n * s.rel_heads + (s.rel_heads > 1 ? h : 0)) * 2,
                                        x, y, s);
        mix_window<kSide>(q + qh * s.channels,
                          k + (b * s.hk * s.wk * s.heads + h) * s.channels, w, s, sc);
        const scalar_t* v_head = v + (b * s.hk * s.wk * s.heads + h) * s.cv;
        aggregate<kSide>(v_head, w, s, sc.attn.data(), acc.data());
        scalar_t* op = out + qh * s.cv;
        for (int64_t c = 0; c < s.cv; ++c) op[c] = static_cast<scalar_t>(acc[c]);
        if (attn_out != nullptr) {
          for (int64_t j = 0; j < window; ++j) {
            attn_out[qh * window + j] = static_cast<scalar_t>(sc.attn[j]);
          }
        }
      }
    }
  });
}

}  // namespace

namespace crossview {

std::vector<at::Tensor> forward(const at::Tensor& q_in, const at::Tensor& k_in,
                                const at::Tensor& v_in, const at::Tensor& rel_in, int64_t radius,
                                bool l1, double scale, bool need_attn) {
  const at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(),
                   rel = rel_in.contiguous();
  const Shape s = shape_of(q, k, v, rel, radius, l1, scale);
  at::Tensor out = at::empty({s.batch, s.hq, s.wq, s.heads, s.cv}, q.options());
  at::Tensor attn = need_attn ? at::empty({s.batch, s.hq, s.wq, s.heads, s.window}, q.options())
                              : at::empty({0}, q.options());
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, q.scalar_type(), "match_attention_forward", [&] {
    with_side(s.side, [&](auto side) {
    forward_kernel<decltype(side)::value, scalar_t>(s, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                             v.data_ptr<scalar_t>(), rel.data_ptr<scalar_t>(),
                             out.data_ptr<scalar_t>(),
                             need_attn ? attn.data_ptr<scalar_t>() : nullptr);
    });
  });
  return {out, attn};
}

// Pass 1 of the backward: per query, grad_q and grad_rel_pos; keeps for pass 2 the origin of
// each window, the score gradients (times the scale) and the mixed weights of its keys.
template <int kSide, typename scalar_t>
void backward_queries(const Shape& s, const scalar_t* q, const scalar_t* k, const scalar_t* v,
                      const scalar_t* rel, const scalar_t* grad_out, const scalar_t* grad_attn,
                      scalar_t* grad_q, at::opmath_type<scalar_t>* grad_rel,
                      at::opmath_type<scalar_t>* dscore, at::opmath_type<scalar_t>* mixed,
                      int64_t* origin) {
  const int64_t side = kSide > 0 ? kSide : s.side, window = side * side;
  using acc_t = at::opmath_type<scalar_t>;
  parallel_chunks(s.batch * s.hq * s.wq, kChunk, [&](int64_t begin, int64_t end) {
    Scratch<acc_t> sc(window);
    std::vector<acc_t> g(window), gq(s.channels);
    for (int64_t n = begin; n < end; ++n) {
      const int64_t b = n / (s.hq * s.wq), y = (n / s.wq) % s.hq, x = n % s.wq;
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t qh = n * s.heads + h;
        const int64_t rel_index = n * s.rel_heads + (s.rel_heads > 1 ? h : 0);
        const auto w = window_at<acc_t>(rel + rel_index * 2, x, y, s);
        const scalar_t* qp = q + qh * s.channels;
        const scalar_t* k_head = k + (b * s.hk * s.wk * s.heads + h) * s.channels;
        const scalar_t* v_head = v + (b * s.hk * s.wk * s.heads + h) * s.cv;
        const scalar_t* go = grad_out + qh * s.cv;
        mix_window<kSide>(qp, k_head, w, s, sc);
        for (int64_t dy = 0; dy < side; ++dy) {
          for (int64_t dx = 0; dx < side; ++dx) {
            const int64_t key = ((w.origin_y + dy) * s.wk + w.origin_x + dx) * s.heads;
            const int64_t j = dy * side + dx;
            g[j] = similarity<acc_t>(go, v_head + key * s.cv, s.cv, false) +
                   (grad_attn != nullptr ? static_cast<acc_t>(grad_attn[qh * window + j]) : 0);
          }
        }
        // dL/dw_c = G_c; softmax backward per corner, summed into the score gradients.
        acc_t corner_grad[4];
        acc_t* ds = dscore + qh * window;
        for (int c = 0; c < 4; ++c) {
          acc_t total = 0;
          for_corner<kSide>(s, c, [&](int64_t j) { total += sc.prob(c, j) * g[j]; });
          corner_grad[c] = total;
        }
        if (sc.shared) {
          const acc_t pulled[4] = {sc.weight[0] * sc.inv_sum[0] * corner_grad[0],
                                   sc.weight[1] * sc.inv_sum[1] * corner_grad[1],
                                   sc.weight[2] * sc.inv_sum[2] * corner_grad[2],
                                   sc.weight[3] * sc.inv_sum[3] * corner_grad[3]};
          for (int64_t dy = 0; dy < side; ++dy) {
            for (int64_t dx = 0; dx < side; ++dx) {
              const int64_t j = dy * side + dx;
              ds[j] = sc.expo[j] * (sc.coef[j] * g[j] - over_corners(dy, dx, side, pulled));
            }
          }
        } else {
          std::fill(ds, ds + window, acc_t(0));
          for (int c = 0; c < 4; ++c) {
            for_corner<kSide>(s, c, [&](int64_t j) {
              ds[j] += sc.weight[c] * sc.prob(c, j) * (g[j] - corner_grad[c]);
            });
          }
        }
        const acc_t dfx = (1 - w.fy) * (corner_grad[1] - corner_grad[0]) +
                          w.fy * (corner_grad[3] - corner_grad[2]);
        const acc_t dfy = (1 - w.fx) * (corner_grad[2] - corner_grad[0]) +
                          w.fx * (corner_grad[3] - corner_grad[1]);
        grad_rel[rel_index * 2] += w.free_x ? dfx : acc_t(0);
        grad_rel[rel_index * 2 + 1] += w.free_y ? dfy : acc_t(0);

        std::fill(gq.begin(), gq.end(), acc_t(0));
        const acc_t scale = static_cast<acc_t>(s.scale);
        for (int64_t dy = 0; dy < side; ++dy) {
          for (int64_t dx = 0; dx < side; ++dx) {
            const int64_t j = dy * side + dx;
            ds[j] *= scale;
            mixed[qh * window + j] = sc.attn[j];
            const acc_t a = ds[j];
            const scalar_t* kp =
                k_head + ((w.origin_y + dy) * s.wk + w.origin_x + dx) * s.heads * s.channels;
            if (s.l1) {
#pragma omp simd
              for (int64_t c = 0; c < s.channels; ++c) {
                gq[c] -= a * sign(static_cast<acc_t>(qp[c]) - static_cast<acc_t>(kp[c]));
              }
            } else {
#pragma omp simd
              for (int64_t c = 0; c < s.channels; ++c) gq[c] += a * static_cast<acc_t>(kp[c]);
            }
          }
        }
        for (int64_t c = 0; c < s.channels; ++c) {
          grad_q[qh * s.channels + c] = static_cast<scalar_t>(gq[c]);
        }
        origin[qh] = w.origin_y * s.wk + w.origin_x;
      }
    }
  });
}

// Counting sort of the windows by origin, per (batch, head): `offsets` [B*h, Hk*Wk + 1] and
// `members` [B*h, Hq*Wq] (query positions in increasing order inside each origin).
void sort_windows(const Shape& s, const int64_t* origin, int64_t* offsets, int64_t* members) {
  const int64_t keys = s.hk * s.wk, queries = s.hq * s.wq;
  at::parallel_for(0, s.batch * s.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> fill(keys);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s.heads, h = bh % s.heads;
      int64_t* off = offsets + bh * (keys + 1);
      std::fill(off, off + keys + 1, int64_t(0));
      for (int64_t p = 0; p < queries; ++p) ++off[origin[(b * queries + p) * s.heads + h] + 1];
      for (int64_t o = 0; o < keys; ++o) off[o + 1] += off[o];
      std::copy(off, off + keys, fill.begin());
      for (int64_t p = 0; p < queries; ++p) {
        members[bh * queries + fill[origin[(b * queries + p) * s.heads + h]]++] = p;
      }
    }
  });
}

// Pass 2: every key (and value) sums the contributions of the windows that cover it.
template <int kSide, typename scalar_t>
void backward_keys(const Shape& s, const scalar_t* q, const scalar_t* k,
                   const scalar_t* grad_out, const at::opmath_type<scalar_t>* dscore,
                   const at::opmath_type<scalar_t>* mixed, const int64_t* offsets,
                   const int64_t* members, scalar_t* grad_k, scalar_t* grad_v) {
  const int64_t side = kSide > 0 ? kSide : s.side, window = side * side;
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t keys = s.hk * s.wk, queries = s.hq * s.wq;
  parallel_chunks(s.batch * keys, kChunk, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> gk(s.channels), gv(s.cv);
    for (int64_t m = begin; m < end; ++m) {
      const int64_t b = m / keys, key = m % keys, ky = key / s.wk, kx = key % s.wk;
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t bh = b * s.heads + h;
        const scalar_t* kp = k + (m * s.heads + h) * s.channels;
        std::fill(gk.begin(), gk.end(), acc_t(0));
        std::fill(gv.begin(), gv.end(), acc_t(0));
        for (int64_t dy = 0; dy < side; ++dy) {
          const int64_t oy = ky - dy;
          if (oy < 0 || oy > s.hk - side) continue;
          for (int64_t dx = 0; dx < side; ++dx) {
            const int64_t ox = kx - dx;
            if (ox < 0 || ox > s.wk - side) continue;
            const int64_t j = dy * side + dx;
            const int64_t* off = offsets + bh * (keys + 1) + oy * s.wk + ox;
            for (int64_t i = off[0]; i < off[1]; ++i) {
              const int64_t qh = (b * queries + members[bh * queries + i]) * s.heads + h;
              const acc_t a = dscore[qh * window + j];
              const acc_t p = mixed[qh * window + j];
              const scalar_t* qp = q + qh * s.channels;
              const scalar_t* go = grad_out + qh * s.cv;
              if (s.l1) {
#pragma omp simd
                for (int64_t c = 0; c < s.channels; ++c) {
                  gk[c] += a * sign(static_cast<acc_t>(qp[c]) - static_cast<acc_t>(kp[c]));
                }
              } else {
#pragma omp simd
                for (int64_t c = 0; c < s.channels; ++c) gk[c] += a * static_cast<acc_t>(qp[c]);
              }
#pragma omp simd
              for (int64_t c = 0; c < s.cv; ++c) gv[c] += p * static_cast<acc_t>(go[c]);
            }
          }
        }
        for (int64_t c = 0; c < s.channels; ++c) {
          grad_k[(m * s.heads + h) * s.channels + c] = static_cast<scalar_t>(gk[c]);
        }
        for (int64_t c = 0; c < s.cv; ++c) {
          grad_v[(m * s.heads + h) * s.cv + c] = static_cast<scalar_t>(gv[c]);
        }
      }
    }
  });
}

std::vector<at::Tensor> backward(const at::Tensor& grad_out_in,
                                 const c10::optional<at::Tensor>& grad_attn_in,
                                 const at::Tensor& q_in, const at::Tensor& k_in,
                                 const at::Tensor& v_in, const at::Tensor& rel_in,
                                 int64_t radius, bool l1, double scale) {
  const at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(),
                   rel = rel_in.contiguous(), grad_out = grad_out_in.contiguous();
  const Shape s = shape_of(q, k, v, rel, radius, l1, scale);
  TORCH_CHECK(grad_out.sizes() == at::IntArrayRef({s.batch, s.hq, s.wq, s.heads, s.cv}) &&
                  grad_out.scalar_type() == q.scalar_type(),
              "match_attention_backward: grad_out does not match the output");
  at::Tensor grad_attn;
  if (grad_attn_in.has_value() && grad_attn_in->defined()) {
    grad_attn = grad_attn_in->contiguous();
    TORCH_CHECK(grad_attn.sizes() == at::IntArrayRef({s.batch, s.hq, s.wq, s.heads, s.window}) &&
                    grad_attn.scalar_type() == q.scalar_type(),
                "match_attention_backward: grad_attn does not match the weights");
  }
  const auto acc_dtype = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto acc_options = q.options().dtype(acc_dtype);
  const auto index_options = q.options().dtype(at::kLong);
  const int64_t query_heads = s.batch * s.hq * s.wq * s.heads;
  at::Tensor grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
  at::Tensor grad_rel = at::zeros(rel.sizes(), acc_options);
  at::Tensor dscore = at::empty({query_heads, s.window}, acc_options);
  at::Tensor mixed = at::empty({query_heads, s.window}, acc_options);
  at::Tensor origin = at::empty({query_heads}, index_options);
  at::Tensor offsets = at::empty({s.batch * s.heads, s.hk * s.wk + 1}, index_options);
  at::Tensor members = at::empty({s.batch * s.heads, s.hq * s.wq}, index_options);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, q.scalar_type(), "match_attention_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    with_side(s.side, [&](auto side) {
    backward_queries<decltype(side)::value, scalar_t>(s, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                               v.data_ptr<scalar_t>(), rel.data_ptr<scalar_t>(),
                               grad_out.data_ptr<scalar_t>(),
                               grad_attn.defined() ? grad_attn.data_ptr<scalar_t>() : nullptr,
                               grad_q.data_ptr<scalar_t>(), grad_rel.data_ptr<acc_t>(),
                               dscore.data_ptr<acc_t>(), mixed.data_ptr<acc_t>(),
                               origin.data_ptr<int64_t>());
    sort_windows(s, origin.data_ptr<int64_t>(), offsets.data_ptr<int64_t>(),
                 members.data_ptr<int64_t>());
    backward_keys<decltype(side)::value, scalar_t>(s, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                            grad_out.data_ptr<scalar_t>(), dscore.data_ptr<acc_t>(),
                            mixed.data_ptr<acc_t>(), offsets.data_ptr<int64_t>(),
                            members.data_ptr<int64_t>(), grad_k.data_ptr<scalar_t>(),
                            grad_v.data_ptr<scalar_t>());
    });
  });
  return {grad_q, grad_k, grad_v, grad_rel.to(q.scalar_type())};
}

}  // namespace crossview
