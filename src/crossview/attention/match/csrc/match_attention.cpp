// Fused CPU kernels for MatchAttention (window attention with BilinearSoftmax).
//
// Layout (all contiguous, heads-last): q [B, Hq, Wq, h, C], k [B, Hk, Wk, h, C],
// v [B, Hk, Wk, h, Cv], rel_pos [B, Hq, Wq, h or 1, 2] (x, y). The semantics are those of
// crossview/attention/match/reference.py; these kernels never gather windows into tensors:
// each query works on a few small per-thread buffers of (2r+2)^2 scores.
//
// Forward: one task per query position (b, y, x), looping over heads (so a rel_pos shared by
// the heads gets its gradient summed in a fixed order).
// Backward: pass 1 recomputes each query's window, writes grad_q and grad_rel_pos and keeps
// the score gradients and mixed weights of its (2r+2)^2 keys; pass 2 gathers, for every key, the
// contributions of the queries whose window covers it, found through a counting sort of the
// windows by their origin. Every sum runs in an order that does not depend on the thread count.

#include <torch/extension.h>

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
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

// One 64-byte vector register of accumulators (16 floats or 8 doubles), via the GCC/Clang
// vector extension: -march=native maps it to whatever SIMD width the CPU has.
template <typename acc_t>
struct Lanes {
  typedef acc_t type __attribute__((vector_size(64)));
  static constexpr int count = 64 / sizeof(acc_t);
};
template <typename acc_t>
using vec_t = typename Lanes<acc_t>::type;

template <typename acc_t, typename scalar_t>
__attribute__((always_inline)) inline vec_t<acc_t> load(const scalar_t* p) {
  vec_t<acc_t> out;
  if constexpr (std::is_same_v<acc_t, scalar_t>) {
    std::memcpy(&out, p, sizeof(out));
  } else {
    for (int l = 0; l < Lanes<acc_t>::count; ++l) out[l] = static_cast<acc_t>(p[l]);
  }
  return out;
}

template <typename acc_t>
__attribute__((always_inline)) inline void store(const vec_t<acc_t>& value, acc_t* p) {
  std::memcpy(p, &value, sizeof(value));
}

template <typename acc_t>
__attribute__((always_inline)) inline vec_t<acc_t> absolute(vec_t<acc_t> x) {
  return x < 0 ? -x : x;
}

// Sum of the lanes by a fixed tree of halves (the same order on every thread).
__attribute__((always_inline)) inline float lane_sum(vec_t<float> v) {
  typedef float half8 __attribute__((vector_size(32)));
  typedef float half4 __attribute__((vector_size(16)));
  half8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
            __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  half4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (b[0] + b[2]) + (b[1] + b[3]);
}

__attribute__((always_inline)) inline double lane_sum(vec_t<double> v) {
  typedef double half4 __attribute__((vector_size(32)));
  half4 a = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  return (a[0] + a[2]) + (a[1] + a[3]);
}

// Negative L1 distance or dot product of two channel vectors, a vector register at a time.
template <typename acc_t, typename scalar_t>
__attribute__((always_inline)) inline acc_t similarity(const scalar_t* a, const scalar_t* b,
                                                       int64_t n, bool l1) {
  constexpr int kLanes = Lanes<acc_t>::count;
  vec_t<acc_t> lanes = {};
  int64_t c = 0;
  if (l1) {
    for (; c + kLanes <= n; c += kLanes) {
      lanes += absolute<acc_t>(load<acc_t>(a + c) - load<acc_t>(b + c));
    }
  } else {
    for (; c + kLanes <= n; c += kLanes) lanes += load<acc_t>(a + c) * load<acc_t>(b + c);
  }
  acc_t total = lane_sum(lanes);
  for (; c < n; ++c) {
    total += l1 ? std::abs(static_cast<acc_t>(a[c]) - static_cast<acc_t>(b[c]))
                : static_cast<acc_t>(a[c]) * static_cast<acc_t>(b[c]);
  }
  return l1 ? -total : total;
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

  explicit Scratch(int64_t window) : score(window), expo(window), attn(window), coef(window) {}

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
    for (int64_t dx = 0; dx < side; ++dx) {
      sc.score[dy * side + dx] =
          static_cast<acc_t>(s.scale) *
          similarity<acc_t>(qp, row + dx * key_stride, s.channels, s.l1);
    }
  }
  acc_t corner_max[4];
  for (int c = 0; c < 4; ++c) {
    acc_t m = -std::numeric_limits<acc_t>::infinity();
    for_corner<kSide>(s, c, [&](int64_t j) { m = std::max(m, sc.score[j]); });
    corner_max[c] = m;
  }
  sc.top = std::max(std::max(corner_max[0], corner_max[1]), std::max(corner_max[2], corner_max[3]));
  for (int64_t j = 0; j < window; ++j) sc.expo[j] = std::exp(sc.score[j] - sc.top);
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

// acc[c] = sum over the window's keys j of weight[j] * v_j[c], a vector register of channels at
// a time (the accumulators stay in registers across the keys).
template <int kSide, typename scalar_t, typename acc_t>
void aggregate(const scalar_t* v_head, const Window<acc_t>& w, const Shape& s,
               const acc_t* weight, acc_t* acc) {
  const int64_t side = kSide > 0 ? kSide : s.side;
  constexpr int kLanes = Lanes<acc_t>::count;
  const int64_t stride = s.heads * s.cv;
  const scalar_t* origin = v_head + (w.origin_y * s.wk + w.origin_x) * stride;
  int64_t c = 0;
  for (; c + kLanes <= s.cv; c += kLanes) {
    vec_t<acc_t> total = {};
    for (int64_t dy = 0; dy < side; ++dy) {
      const scalar_t* row = origin + dy * s.wk * stride + c;
      for (int64_t dx = 0; dx < side; ++dx) {
        total += weight[dy * side + dx] * load<acc_t>(row + dx * stride);
      }
    }
    store<acc_t>(total, acc + c);
  }
  for (; c < s.cv; ++c) {
    acc_t total = 0;
    for (int64_t dy = 0; dy < side; ++dy) {
      const scalar_t* row = origin + dy * s.wk * stride + c;
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

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "MatchAttention forward: (out, attn or empty)");
  m.def("backward", &backward, "MatchAttention backward: (grad_q, grad_k, grad_v, grad_rel_pos)");
}
