// The fused CPU MatchAttention kernels (match_attention.cpp), bound in module.cpp.
#pragma once

#include <torch/extension.h>

#include <vector>

namespace crossview {

// (out [B, Hq, Wq, h, Cv], attn [B, Hq, Wq, h, (2r+2)^2] or an empty tensor)
std::vector<at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& rel_pos, int64_t radius, bool l1, double scale,
                                bool need_attn);

// (grad_q, grad_k, grad_v, grad_rel_pos)
std::vector<at::Tensor> backward(const at::Tensor& grad_out,
                                 const c10::optional<at::Tensor>& grad_attn, const at::Tensor& q,
                                 const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& rel_pos, int64_t radius, bool l1,
                                 double scale);

}  // namespace crossview
