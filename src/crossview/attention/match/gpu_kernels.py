"""Fused MatchAttention kernels in Triton (the ``triton`` backend, :mod:`.gpu`).

Layout as the C++ kernels (``csrc/``): q ``[B, Hq, Wq, h, C]``, k ``[B, Hk, Wk, h, C]``,
v ``[B, Hk, Wk, h, Cv]``, rel_pos ``[B, Hq, Wq, h or 1, 2]`` (x, y), made contiguous. One
program handles ``BLOCK`` rows of the flattened ``[B * Hq * Wq * h]`` (query, head) pairs; the
semantics are those of :mod:`crossview.attention.match.reference`.

- Forward: a single sweep over the ``(2r+2)^2`` keys of each window with an online softmax
  per BilinearSoftmax corner (nw, ne, sw, se): each corner keeps its own running max, sum and
  value accumulator, so no corner underflows however far its scores lie below the others' (the
  C++ kernel needs a fallback shift for that). No window is materialised; the mixed weights are
  recomputed in a second sweep and written only when asked for.
- Backward, per (query, head): sweep 1 gives each corner's max and sum, sweep 2 the corner
  gradients ``G_c = sum_j p_c(j) g_j`` (``g_j = grad_out . v_j + grad_attn_j``), sweep 3 the
  score gradients, ``grad_q``, and adds each key's share to ``grad_k`` and ``grad_v`` with
  atomic adds into accumulator-dtype buffers. ``grad_rel_pos`` comes from the bilinear weights
  (as the C++ kernel), zero where the clamp moved the centre. The atomic adds make the key and
  value gradients' summation order vary between runs on a GPU (tolerances, not bits).

Every sum runs in float32 (float64 for float64 inputs); bfloat16 and float16 are read and
written in their own dtype.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

# Triton decides at decoration time whether ``@triton.jit`` builds GPU kernels or interpreted
# ones (``TRITON_INTERPRET=1``, numpy on CPU tensors), so this is what the kernels below are.
INTERPRETED: bool = bool(triton.knobs.runtime.interpret)
# Channels per head (C and Cv) the kernels keep in registers: four value accumulators of
# [BLOCK, Cv] per program.
MAX_CHANNELS = 256
# Triton's interpreter converts float32 to bfloat16 by truncation (and its round-to-nearest
# path mishandles the carry into the exponent), where a GPU rounds to nearest. Under the
# interpreter the kernels therefore write their bfloat16 and float16 outputs in float32 and
# torch rounds them to nearest, as the GPU's own conversion does.
STAGE_OUTPUTS_IN_FLOAT32 = INTERPRETED
# Rows per program: on a GPU chosen for the register budget; the interpreter runs programs one
# after another in Python, so there large blocks (few programs) are what keeps it fast.
INTERPRETER_BLOCK = 2048


@triton.jit
def _rows(q_ptr, rel_ptr, params_ptr, n_rows, Hq, Wq, heads, rel_heads, C, CV,
          RADIUS: tl.constexpr, BLOCK: tl.constexpr, C_PAD: tl.constexpr, CV_PAD: tl.constexpr,
          ACC: tl.constexpr):
    """This program's rows: their mask and int64 index, batch and head, rel_pos index, window
    origin (x, y), the centre's fractional part (fx, fy), whether the clamp left each coordinate
    alone, the channel ranges and masks of q (and k) and of v, the queries ``[BLOCK, C_PAD]``
    and the score scale."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < n_rows
    h = rows % heads
    n = rows // heads
    x = n % Wq
    y = (n // Wq) % Hq
    b = n // (Wq * Hq)
    rel_index = n * rel_heads + h % rel_heads
    hi_x = tl.load(params_ptr + 1)
    hi_y = tl.load(params_ptr + 2)
    cx = tl.load(rel_ptr + rel_index * 2, mask=row_mask, other=0).to(ACC) + x.to(ACC)
    cy = tl.load(rel_ptr + rel_index * 2 + 1, mask=row_mask, other=0).to(ACC) + y.to(ACC)
    lo = tl.zeros_like(cx) + RADIUS
    free_x = (cx >= lo) & (cx <= hi_x)
    free_y = (cy >= lo) & (cy <= hi_y)
    cx = tl.minimum(tl.maximum(cx, lo), hi_x)
    cy = tl.minimum(tl.maximum(cy, lo), hi_y)
    corner_x = tl.floor(cx)
    corner_y = tl.floor(cy)
    row64 = rows.to(tl.int64)
    cc = tl.arange(0, C_PAD)
    q_mask = row_mask[:, None] & (cc < C)[None, :]
    qt = tl.load(q_ptr + row64[:, None] * C + cc[None, :], mask=q_mask, other=0).to(ACC)
    cv = tl.arange(0, CV_PAD)
    v_mask = row_mask[:, None] & (cv < CV)[None, :]
    return (row_mask, row64, b.to(tl.int64), h.to(tl.int64), rel_index,
            corner_x.to(tl.int64) - RADIUS, corner_y.to(tl.int64) - RADIUS,
            cx - corner_x, cy - corner_y, free_x, free_y, cc, q_mask, cv, v_mask, qt,
            tl.load(params_ptr))


@triton.jit
def _bilinear(fx, fy):
    """``[BLOCK, 4]`` bilinear weights of the nw, ne, sw, se corners and their derivatives in
    fx and fy."""
    corner = tl.arange(0, 4)
    right = (corner % 2 == 1)[None, :]
    below = (corner // 2 == 1)[None, :]
    wx = tl.where(right, fx[:, None], 1 - fx[:, None])
    wy = tl.where(below, fy[:, None], 1 - fy[:, None])
    return wx * wy, tl.where(right, 1.0, -1.0) * wy, wx * tl.where(below, 1.0, -1.0)


@triton.jit
def _holds(DY: tl.constexpr, DX: tl.constexpr, SIDE: tl.constexpr):
    """``[1, 4]``: which corners' ``(2r+1)^2`` sub-windows hold key (DY, DX) of the window."""
    corner = tl.arange(0, 4)
    in_x = DX - corner % 2  # the key's column in each corner's sub-window
    in_y = DY - corner // 2
    return ((in_x >= 0) & (in_x <= SIDE - 2) & (in_y >= 0) & (in_y <= SIDE - 2))[None, :]


@triton.jit
def _key_scores(k_ptr, qt, scale, b, h, ox, oy, Hk, Wk, heads, C, cc, q_mask,
                DY: tl.constexpr, DX: tl.constexpr, L1: tl.constexpr, ACC: tl.constexpr):
    """Row index of key (DY, DX) of each row's window in the ``[B * Hk * Wk * h]`` keys, the
    keys ``[BLOCK, C_PAD]`` and the scores (scale times negative L1 distance or dot product)."""
    key = ((b * Hk + oy + DY) * Wk + ox + DX) * heads + h
    kt = tl.load(k_ptr + key[:, None] * C + cc[None, :], mask=q_mask, other=0).to(ACC)
    if L1:  # noqa: SIM108 (an if statement on a constexpr is what Triton compiles to one branch)
        s = -tl.sum(tl.abs(qt - kt), axis=1) * scale
    else:
        s = tl.sum(qt * kt, axis=1) * scale
    return key, kt, s


@triton.jit
def _online(m, total, s, holds):
    """Key score ``s`` joins the online softmax of the corners that hold it: the new running
    maxima and sums ``[BLOCK, 4]``, the factor rescaling what was summed before and the key's
    exponential (0 in the other corners)."""
    # Computed for every corner, used where it holds the key: top is finite (s is), so no
    # -inf - -inf is ever formed for the corners that have not met a key yet.
    top = tl.maximum(m, s[:, None])
    alpha = tl.where(holds, tl.exp(m - top), 1.0)
    p = tl.where(holds, tl.exp(s[:, None] - top), 0.0)
    return tl.where(holds, top, m), total * alpha + p, alpha, p


@triton.jit
def _exp_below(s, m):
    """``exp(s - m)`` ``[BLOCK, 4]`` for corners with max score ``m``: no more than 1 in the
    corners that hold the key (s <= m there, both computed alike), and capped at 1 in the
    others, whose values are discarded, so that they never overflow."""
    return tl.exp(tl.minimum(s[:, None] - m, 0.0))


@triton.jit
def _softmax_sums(k_ptr, qt, scale, b, h, ox, oy, Hk, Wk, heads, C, cc, q_mask,
                  BLOCK: tl.constexpr, RADIUS: tl.constexpr, L1: tl.constexpr,
                  ACC: tl.constexpr):
    """Each corner's max score and softmax sum ``[BLOCK, 4]`` (a sweep over the keys)."""
    SIDE: tl.constexpr = 2 * RADIUS + 2
    m = tl.full([BLOCK, 4], float("-inf"), ACC)
    total = tl.zeros([BLOCK, 4], ACC)
    for dy in tl.static_range(SIDE):
        for dx in tl.static_range(SIDE):
            _, _, s = _key_scores(k_ptr, qt, scale, b, h, ox, oy, Hk, Wk, heads, C, cc, q_mask,
                                  dy, dx, L1, ACC)
            m, total, _, _ = _online(m, total, s, _holds(dy, dx, SIDE))
    return m, total


@triton.jit
def _probs_and_g(k_ptr, v_ptr, grad_attn_ptr, qt, go, m, total, scale, row64, row_mask, b, h,
                 ox, oy, Hk, Wk, heads, C, CV, cc, cv, q_mask, v_mask, DY: tl.constexpr,
                 DX: tl.constexpr, RADIUS: tl.constexpr, L1: tl.constexpr,
                 HAS_GRAD_ATTN: tl.constexpr, ACC: tl.constexpr):
    """For key (DY, DX): its row index, the keys, its probability in each corner's softmax
    ``[BLOCK, 4]`` (0 where the corner does not hold it) and the gradient of its mixed weight
    ``g = grad_out . v + grad_attn``."""
    SIDE: tl.constexpr = 2 * RADIUS + 2
    key, kt, s = _key_scores(k_ptr, qt, scale, b, h, ox, oy, Hk, Wk, heads, C, cc, q_mask,
                             DY, DX, L1, ACC)
    vt = tl.load(v_ptr + key[:, None] * CV + cv[None, :], mask=v_mask, other=0).to(ACC)
    g = tl.sum(go * vt, axis=1)
    if HAS_GRAD_ATTN:
        g += tl.load(grad_attn_ptr + row64 * (SIDE * SIDE) + DY * SIDE + DX, mask=row_mask,
                     other=0).to(ACC)
    probs = tl.where(_holds(DY, DX, SIDE), _exp_below(s, m) / total, 0.0)
    return key, kt, probs, g


@triton.jit
def _forward_kernel(q_ptr, k_ptr, v_ptr, rel_ptr, params_ptr, out_ptr, attn_ptr, n_rows,
                    Hq, Wq, Hk, Wk, heads, rel_heads, C, CV,
                    RADIUS: tl.constexpr, L1: tl.constexpr, NEED_ATTN: tl.constexpr,
                    BLOCK: tl.constexpr, C_PAD: tl.constexpr, CV_PAD: tl.constexpr,
                    ACC: tl.constexpr):
    SIDE: tl.constexpr = 2 * RADIUS + 2
    row_mask, row64, b, h, _, ox, oy, fx, fy, _, _, cc, q_mask, cv, v_mask, qt, scale = _rows(
        q_ptr, rel_ptr, params_ptr, n_rows, Hq, Wq, heads, rel_heads, C, CV, RADIUS, BLOCK,
        C_PAD, CV_PAD, ACC)
    # Per corner: running max, sum and value accumulator.
    m = tl.full([BLOCK, 4], float("-inf"), ACC)
    total = tl.zeros([BLOCK, 4], ACC)
    acc = tl.zeros([BLOCK, 4, CV_PAD], ACC)
    for dy in tl.static_range(SIDE):
        for dx in tl.static_range(SIDE):
            key, _, s = _key_scores(k_ptr, qt, scale, b, h, ox, oy, Hk, Wk, heads, C, cc,
                                    q_mask, dy, dx, L1, ACC)
            vt = tl.load(v_ptr + key[:, None] * CV + cv[None, :], mask=v_mask, other=0).to(ACC)
            m, total, alpha, p = _online(m, total, s, _holds(dy, dx, SIDE))
            acc = acc * alpha[:, :, None] + p[:, :, None] * vt[:, None, :]
    weights, _, _ = _bilinear(fx, fy)
    coef = weights / total  # each corner's bilinear weight over its softmax sum
    out = tl.sum(coef[:, :, None] * acc, axis=1)
    tl.store(out_ptr + row64[:, None] * CV + cv[None, :], out.to(out_ptr.dtype.element_ty),
             mask=v_mask)
    if NEED_ATTN:
        for dy in tl.static_range(SIDE):
            for dx in tl.static_range(SIDE):
                _, _, s = _key_scores(k_ptr, qt, scale, b, h, ox, oy, Hk, Wk, heads, C, cc,
                                      q_mask, dy, dx, L1, ACC)
                mixed = tl.sum(tl.where(_holds(dy, dx, SIDE), coef * _exp_below(s, m), 0.0),
                               axis=1)
                tl.store(attn_ptr + row64 * (SIDE * SIDE) + dy * SIDE + dx,
                         mixed.to(attn_ptr.dtype.element_ty), mask=row_mask)


@triton.jit
def _backward_kernel(q_ptr, k_ptr, v_ptr, rel_ptr, params_ptr, grad_out_ptr, grad_attn_ptr,
                     grad_q_ptr, grad_k_ptr, grad_v_ptr, grad_rel_ptr, n_rows,
                     Hq, Wq, Hk, Wk, heads, rel_heads, C, CV,
                     RADIUS: tl.constexpr, L1: tl.constexpr, HAS_GRAD_ATTN: tl.constexpr,
                     BLOCK: tl.constexpr, C_PAD: tl.constexpr, CV_PAD: tl.constexpr,
                     ACC: tl.constexpr):
    SIDE: tl.constexpr = 2 * RADIUS + 2
    (row_mask, row64, b, h, rel_index, ox, oy, fx, fy, free_x, free_y, cc, q_mask, cv, v_mask,
     qt, scale) = _rows(q_ptr, rel_ptr, params_ptr, n_rows, Hq, Wq, heads, rel_heads, C, CV,
                        RADIUS, BLOCK, C_PAD, CV_PAD, ACC)
    go = tl.load(grad_out_ptr + row64[:, None] * CV + cv[None, :], mask=v_mask,
                 other=0).to(ACC)
    weights, dw_dfx, dw_dfy = _bilinear(fx, fy)
    m, total = _softmax_sums(k_ptr, qt, scale, b, h, ox, oy, Hk, Wk, heads, C, cc, q_mask,
                             BLOCK, RADIUS, L1, ACC)
    # Corner gradients G_c = sum over the corner's keys of p_c(j) * g_j.
    corner_grad = tl.zeros([BLOCK, 4], ACC)
    for dy in tl.static_range(SIDE):
        for dx in tl.static_range(SIDE):
            _, _, probs, g = _probs_and_g(
                k_ptr, v_ptr, grad_attn_ptr, qt, go, m, total, scale, row64, row_mask, b, h, ox,
                oy, Hk, Wk, heads, C, CV, cc, cv, q_mask, v_mask, dy, dx, RADIUS, L1,
                HAS_GRAD_ATTN, ACC)
            corner_grad += probs * g[:, None]
    # Score gradients ds_j = sum_c w_c p_c(j) (g_j - G_c); grad_q here, each key's share of
    # grad_k and grad_v added to its row.
    gq = tl.zeros([BLOCK, C_PAD], ACC)
    for dy in tl.static_range(SIDE):
        for dx in tl.static_range(SIDE):
            key, kt, probs, g = _probs_and_g(
                k_ptr, v_ptr, grad_attn_ptr, qt, go, m, total, scale, row64, row_mask, b, h, ox,
                oy, Hk, Wk, heads, C, CV, cc, cv, q_mask, v_mask, dy, dx, RADIUS, L1,
                HAS_GRAD_ATTN, ACC)
            mixed = weights * probs
            ds = tl.sum(mixed * (g[:, None] - corner_grad), axis=1) * scale
            if L1:
                diff = qt - kt
                sign = (diff > 0).to(ACC) - (diff < 0).to(ACC)
                gq -= ds[:, None] * sign
                gk = ds[:, None] * sign
            else:
                gq += ds[:, None] * kt
                gk = ds[:, None] * qt
            tl.atomic_add(grad_k_ptr + key[:, None] * C + cc[None, :], gk, mask=q_mask)
            tl.atomic_add(grad_v_ptr + key[:, None] * CV + cv[None, :],
                          tl.sum(mixed, axis=1)[:, None] * go, mask=v_mask)
    tl.store(grad_q_ptr + row64[:, None] * C + cc[None, :], gq.to(grad_q_ptr.dtype.element_ty),
             mask=q_mask)
    # The centre's gradient through the bilinear weights (dL/dw_c = G_c); heads sharing
    # rel_pos add up.
    dfx = tl.sum(corner_grad * dw_dfx, axis=1)
    dfy = tl.sum(corner_grad * dw_dfy, axis=1)
    tl.atomic_add(grad_rel_ptr + rel_index * 2, tl.where(free_x, dfx, 0.0), mask=row_mask)
    tl.atomic_add(grad_rel_ptr + rel_index * 2 + 1, tl.where(free_y, dfy, 0.0), mask=row_mask)


def _accumulator(dtype: torch.dtype) -> tuple[torch.dtype, tl.dtype]:
    """The accumulation dtype for inputs of ``dtype`` (torch's and Triton's name of it)."""
    return (torch.float64, tl.float64) if dtype == torch.float64 else (torch.float32, tl.float32)


def _written(dtype: torch.dtype) -> torch.dtype:
    """The dtype the kernels write outputs of ``dtype`` in (see STAGE_OUTPUTS_IN_FLOAT32)."""
    return _accumulator(dtype)[0] if STAGE_OUTPUTS_IN_FLOAT32 else dtype


def _params(q: torch.Tensor, k: torch.Tensor, radius: int, scale: float) -> torch.Tensor:
    """``[scale, upper x clamp, upper y clamp]`` in the accumulation dtype. A tensor rather than
    scalar arguments: Triton passes Python floats as float32, and float64 inputs need them
    exact (computed in double, as the reference does, then rounded once)."""
    _, hk, wk, _, _ = k.shape
    return torch.tensor([scale, wk - 1 - radius - 1e-3, hk - 1 - radius - 1e-3],
                        dtype=_accumulator(q.dtype)[0], device=q.device)


def _launch_settings(rows: int, channels: int, cv: int) -> dict[str, int]:
    """Block size and channel paddings (powers of two, as ``tl.arange`` needs)."""
    c_pad, cv_pad = triton.next_power_of_2(channels), triton.next_power_of_2(cv)
    if INTERPRETED:
        block = min(triton.next_power_of_2(rows), INTERPRETER_BLOCK)
    else:
        # four [BLOCK, Cv] float32 accumulators in registers: 2048 values per program
        block = max(8, min(128, 2048 // max(c_pad, cv_pad)))
    return {"BLOCK": block, "C_PAD": c_pad, "CV_PAD": cv_pad}


def _on_device(tensor: torch.Tensor) -> contextlib.AbstractContextManager:
    """Launch on ``tensor``'s GPU (Triton launches on the current one)."""
    return torch.cuda.device(tensor.device) if tensor.is_cuda else contextlib.nullcontext()


def check_channels(q: torch.Tensor, v: torch.Tensor) -> None:
    """Raise ``ValueError`` unless the channels per head of q and v fit the kernels."""
    for name, tensor in (("q", q), ("v", v)):
        if tensor.shape[-1] > MAX_CHANNELS:
            raise ValueError(f"the triton MatchAttention backend supports at most {MAX_CHANNELS} "
                             f"channels per head, got {name}.shape={tuple(tensor.shape)}; use "
                             f"backend='reference'")


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
            radius: int, l1: bool, scale: float, need_attn: bool,
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused forward: ``out [B, Hq, Wq, h, Cv]`` and the mixed weights
    ``[B, Hq, Wq, h, (2r+2)^2]`` (an empty ``[0]`` tensor unless ``need_attn``), in q's dtype.
    Inputs validated and finite (see :func:`crossview.attention.match.match_attention`)."""
    q, k, v, rel_pos = (t.contiguous() for t in (q, k, v, rel_pos))
    batch, hq, wq, heads, channels = q.shape
    _, hk, wk, _, cv = v.shape
    out = q.new_empty((batch, hq, wq, heads, cv), dtype=_written(q.dtype))
    attn = q.new_empty((batch, hq, wq, heads, (2 * radius + 2) ** 2) if need_attn else (0,),
                       dtype=_written(q.dtype))
    rows = batch * hq * wq * heads
    settings = _launch_settings(rows, channels, cv)
    with _on_device(q):
        _forward_kernel[(triton.cdiv(rows, settings["BLOCK"]),)](
            q, k, v, rel_pos, _params(q, k, radius, scale), out, attn if need_attn else out,
            rows, hq, wq, hk, wk, heads, rel_pos.shape[3], channels, cv, RADIUS=radius, L1=l1,
            NEED_ATTN=need_attn, ACC=_accumulator(q.dtype)[1], **settings)
    return out.to(q.dtype), attn.to(q.dtype)


def backward(grad_out: torch.Tensor, grad_attn: torch.Tensor | None, q: torch.Tensor,
             k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor, radius: int, l1: bool,
             scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fused backward: gradients of q, k, v and rel_pos (their shapes and dtype) for upstream
    gradients ``grad_out [B, Hq, Wq, h, Cv]`` and ``grad_attn [B, Hq, Wq, h, (2r+2)^2]``
    (``None``: the weights were not used)."""
    q, k, v, rel_pos, grad_out = (t.contiguous() for t in (q, k, v, rel_pos, grad_out))
    batch, hq, wq, heads, channels = q.shape
    _, hk, wk, _, cv = v.shape
    acc = _accumulator(q.dtype)
    grad_q = torch.empty_like(q, dtype=_written(q.dtype))
    # Atomic adds gather in the accumulation dtype; rounded to the inputs' dtype at the end.
    grad_k, grad_v, grad_rel = (torch.zeros(t.shape, dtype=acc[0], device=t.device)
                                for t in (k, v, rel_pos))
    rows = batch * hq * wq * heads
    settings = _launch_settings(rows, channels, cv)
    with _on_device(q):
        _backward_kernel[(triton.cdiv(rows, settings["BLOCK"]),)](
            q, k, v, rel_pos, _params(q, k, radius, scale), grad_out,
            grad_out if grad_attn is None else grad_attn.contiguous(),
            grad_q, grad_k, grad_v, grad_rel, rows, hq, wq, hk, wk, heads, rel_pos.shape[3],
            channels, cv, RADIUS=radius, L1=l1, HAS_GRAD_ATTN=grad_attn is not None, ACC=acc[1],
            **settings)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype), grad_rel.to(rel_pos.dtype)
