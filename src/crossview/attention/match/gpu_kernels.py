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
# Rows per program: on a GPU chosen for the register budget; the interpreter runs programs one
# after another in Python, so there large blocks (few programs) are what keeps it fast.
INTERPRETER_BLOCK = 2048


@triton.jit
def _window(rows, row_mask, rel_ptr, params_ptr, Hq, Wq, heads, rel_heads,
            RADIUS: tl.constexpr, ACC: tl.constexpr):
    """Per row: batch, head, rel_pos index, window origin (x, y), the centre's fractional
    part (fx, fy) and whether the clamp left each coordinate alone."""
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
    ox = corner_x.to(tl.int64) - RADIUS
    oy = corner_y.to(tl.int64) - RADIUS
    return b.to(tl.int64), h.to(tl.int64), rel_index, ox, oy, cx - corner_x, cy - corner_y, \
        free_x, free_y


@triton.jit
def _key(b, h, ox, oy, Hk, Wk, heads, DY: tl.constexpr, DX: tl.constexpr):
    """Index of key (DY, DX) of each row's window in the ``[B * Hk * Wk * h]`` key rows."""
    return ((b * Hk + oy + DY) * Wk + ox + DX) * heads + h


@triton.jit
def _scores(qt, kt, scale, L1: tl.constexpr):
    """``scale *`` (negative L1 distance or dot product) of each row's q and k."""
    if L1:  # noqa: SIM108 (an if statement on a constexpr is what Triton compiles to one branch)
        s = -tl.sum(tl.abs(qt - kt), axis=1) * scale
    else:
        s = tl.sum(qt * kt, axis=1) * scale
    return s


@triton.jit
def _online(m, total, acc, s, vt):
    """One key more in a corner's online softmax: running max, sum and weighted values."""
    m_new = tl.maximum(m, s)
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new)
    return m_new, total * alpha + p, acc * alpha[:, None] + p[:, None] * vt


@triton.jit
def _online_sum(m, total, s):
    """One key more in a corner's running max and sum."""
    m_new = tl.maximum(m, s)
    return m_new, total * tl.exp(m - m_new) + tl.exp(s - m_new)


@triton.jit
def _forward_kernel(q_ptr, k_ptr, v_ptr, rel_ptr, params_ptr, out_ptr, attn_ptr, n_rows,
                    Hq, Wq, Hk, Wk, heads, rel_heads, C, CV,
                    RADIUS: tl.constexpr, L1: tl.constexpr, NEED_ATTN: tl.constexpr,
                    BLOCK: tl.constexpr, C_PAD: tl.constexpr, CV_PAD: tl.constexpr,
                    ACC: tl.constexpr):
    SIDE: tl.constexpr = 2 * RADIUS + 2
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < n_rows
    b, h, _, ox, oy, fx, fy, _, _ = _window(rows, row_mask, rel_ptr, params_ptr, Hq, Wq,
                                            heads, rel_heads, RADIUS, ACC)
    scale = tl.load(params_ptr)
    cc = tl.arange(0, C_PAD)
    cv = tl.arange(0, CV_PAD)
    q_mask = row_mask[:, None] & (cc < C)[None, :]
    v_mask = row_mask[:, None] & (cv < CV)[None, :]
    row64 = rows.to(tl.int64)
    qt = tl.load(q_ptr + row64[:, None] * C + cc[None, :], mask=q_mask, other=0).to(ACC)

    # Per corner (0 nw, 1 ne, 2 sw, 3 se): running max, sum and value accumulator.
    m0 = tl.full([BLOCK], float("-inf"), ACC)
    m1 = m0
    m2 = m0
    m3 = m0
    t0 = tl.zeros([BLOCK], ACC)
    t1 = t0
    t2 = t0
    t3 = t0
    a0 = tl.zeros([BLOCK, CV_PAD], ACC)
    a1 = a0
    a2 = a0
    a3 = a0
    for dy in tl.static_range(SIDE):
        for dx in tl.static_range(SIDE):
            key = _key(b, h, ox, oy, Hk, Wk, heads, dy, dx)
            kt = tl.load(k_ptr + key[:, None] * C + cc[None, :], mask=q_mask, other=0).to(ACC)
            vt = tl.load(v_ptr + key[:, None] * CV + cv[None, :], mask=v_mask, other=0).to(ACC)
            s = _scores(qt, kt, scale, L1)
            # The corners whose (2r+1)^2 sub-window holds key (dy, dx), known at compile time.
            if dy < SIDE - 1:
                if dx < SIDE - 1:
                    m0, t0, a0 = _online(m0, t0, a0, s, vt)
                if dx > 0:
                    m1, t1, a1 = _online(m1, t1, a1, s, vt)
            if dy > 0:
                if dx < SIDE - 1:
                    m2, t2, a2 = _online(m2, t2, a2, s, vt)
                if dx > 0:
                    m3, t3, a3 = _online(m3, t3, a3, s, vt)
    # Bilinear weights of the corners, each over its softmax sum.
    w0 = (1 - fx) * (1 - fy) / t0
    w1 = fx * (1 - fy) / t1
    w2 = (1 - fx) * fy / t2
    w3 = fx * fy / t3
    out = w0[:, None] * a0 + w1[:, None] * a1 + w2[:, None] * a2 + w3[:, None] * a3
    tl.store(out_ptr + row64[:, None] * CV + cv[None, :], out.to(out_ptr.dtype.element_ty),
             mask=v_mask)
    if NEED_ATTN:
        for dy in tl.static_range(SIDE):
            for dx in tl.static_range(SIDE):
                key = _key(b, h, ox, oy, Hk, Wk, heads, dy, dx)
                kt = tl.load(k_ptr + key[:, None] * C + cc[None, :], mask=q_mask,
                             other=0).to(ACC)
                s = _scores(qt, kt, scale, L1)
                mixed = tl.zeros([BLOCK], ACC)
                if dy < SIDE - 1:
                    if dx < SIDE - 1:
                        mixed += w0 * tl.exp(s - m0)
                    if dx > 0:
                        mixed += w1 * tl.exp(s - m1)
                if dy > 0:
                    if dx < SIDE - 1:
                        mixed += w2 * tl.exp(s - m2)
                    if dx > 0:
                        mixed += w3 * tl.exp(s - m3)
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
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < n_rows
    b, h, rel_index, ox, oy, fx, fy, free_x, free_y = _window(
        rows, row_mask, rel_ptr, params_ptr, Hq, Wq, heads, rel_heads, RADIUS, ACC)
    scale = tl.load(params_ptr)
    cc = tl.arange(0, C_PAD)
    cv = tl.arange(0, CV_PAD)
    q_mask = row_mask[:, None] & (cc < C)[None, :]
    v_mask = row_mask[:, None] & (cv < CV)[None, :]
    row64 = rows.to(tl.int64)
    qt = tl.load(q_ptr + row64[:, None] * C + cc[None, :], mask=q_mask, other=0).to(ACC)
    go = tl.load(grad_out_ptr + row64[:, None] * CV + cv[None, :], mask=v_mask,
                 other=0).to(ACC)
    w0 = (1 - fx) * (1 - fy)
    w1 = fx * (1 - fy)
    w2 = (1 - fx) * fy
    w3 = fx * fy

    # Sweep 1: each corner's max and softmax sum.
    m0 = tl.full([BLOCK], float("-inf"), ACC)
    m1 = m0
    m2 = m0
    m3 = m0
    t0 = tl.zeros([BLOCK], ACC)
    t1 = t0
    t2 = t0
    t3 = t0
    for dy in tl.static_range(SIDE):
        for dx in tl.static_range(SIDE):
            key = _key(b, h, ox, oy, Hk, Wk, heads, dy, dx)
            kt = tl.load(k_ptr + key[:, None] * C + cc[None, :], mask=q_mask, other=0).to(ACC)
            s = _scores(qt, kt, scale, L1)
            if dy < SIDE - 1:
                if dx < SIDE - 1:
                    m0, t0 = _online_sum(m0, t0, s)
                if dx > 0:
                    m1, t1 = _online_sum(m1, t1, s)
            if dy > 0:
                if dx < SIDE - 1:
                    m2, t2 = _online_sum(m2, t2, s)
                if dx > 0:
                    m3, t3 = _online_sum(m3, t3, s)

    # Sweep 2: corner gradients G_c = sum over the corner's keys of p_c(j) * g_j.
    g0 = tl.zeros([BLOCK], ACC)
    g1 = g0
    g2 = g0
    g3 = g0
    for dy in tl.static_range(SIDE):
        for dx in tl.static_range(SIDE):
            key = _key(b, h, ox, oy, Hk, Wk, heads, dy, dx)
            kt = tl.load(k_ptr + key[:, None] * C + cc[None, :], mask=q_mask, other=0).to(ACC)
            vt = tl.load(v_ptr + key[:, None] * CV + cv[None, :], mask=v_mask, other=0).to(ACC)
            s = _scores(qt, kt, scale, L1)
            g = tl.sum(go * vt, axis=1)
            if HAS_GRAD_ATTN:
                g += tl.load(grad_attn_ptr + row64 * (SIDE * SIDE) + dy * SIDE + dx,
                             mask=row_mask, other=0).to(ACC)
            if dy < SIDE - 1:
                if dx < SIDE - 1:
                    g0 += tl.exp(s - m0) / t0 * g
                if dx > 0:
                    g1 += tl.exp(s - m1) / t1 * g
            if dy > 0:
                if dx < SIDE - 1:
                    g2 += tl.exp(s - m2) / t2 * g
                if dx > 0:
                    g3 += tl.exp(s - m3) / t3 * g

    # Sweep 3: score gradients ds_j = sum_c w_c p_c(j) (g_j - G_c); grad_q here, each key's
    # share of grad_k and grad_v added to its row.
    gq = tl.zeros([BLOCK, C_PAD], ACC)
    for dy in tl.static_range(SIDE):
        for dx in tl.static_range(SIDE):
            key = _key(b, h, ox, oy, Hk, Wk, heads, dy, dx)
            kt = tl.load(k_ptr + key[:, None] * C + cc[None, :], mask=q_mask, other=0).to(ACC)
            vt = tl.load(v_ptr + key[:, None] * CV + cv[None, :], mask=v_mask, other=0).to(ACC)
            s = _scores(qt, kt, scale, L1)
            g = tl.sum(go * vt, axis=1)
            if HAS_GRAD_ATTN:
                g += tl.load(grad_attn_ptr + row64 * (SIDE * SIDE) + dy * SIDE + dx,
                             mask=row_mask, other=0).to(ACC)
            ds = tl.zeros([BLOCK], ACC)
            mixed = tl.zeros([BLOCK], ACC)
            if dy < SIDE - 1:
                if dx < SIDE - 1:
                    p = w0 * tl.exp(s - m0) / t0
                    ds += p * (g - g0)
                    mixed += p
                if dx > 0:
                    p = w1 * tl.exp(s - m1) / t1
                    ds += p * (g - g1)
                    mixed += p
            if dy > 0:
                if dx < SIDE - 1:
                    p = w2 * tl.exp(s - m2) / t2
                    ds += p * (g - g2)
                    mixed += p
                if dx > 0:
                    p = w3 * tl.exp(s - m3) / t3
                    ds += p * (g - g3)
                    mixed += p
            ds = ds * scale
            if L1:
                diff = qt - kt
                sign = (diff > 0).to(ACC) - (diff < 0).to(ACC)
                gq -= ds[:, None] * sign
                gk = ds[:, None] * sign
            else:
                gq += ds[:, None] * kt
                gk = ds[:, None] * qt
            tl.atomic_add(grad_k_ptr + key[:, None] * C + cc[None, :], gk, mask=q_mask)
            tl.atomic_add(grad_v_ptr + key[:, None] * CV + cv[None, :], mixed[:, None] * go,
                          mask=v_mask)
    tl.store(grad_q_ptr + row64[:, None] * C + cc[None, :], gq.to(grad_q_ptr.dtype.element_ty),
             mask=q_mask)
    # The centre's gradient through the bilinear weights; heads sharing rel_pos add up.
    dfx = (1 - fy) * (g1 - g0) + fy * (g3 - g2)
    dfy = (1 - fx) * (g2 - g0) + fx * (g3 - g1)
    tl.atomic_add(grad_rel_ptr + rel_index * 2, tl.where(free_x, dfx, 0), mask=row_mask)
    tl.atomic_add(grad_rel_ptr + rel_index * 2 + 1, tl.where(free_y, dfy, 0), mask=row_mask)


def _accumulator(dtype: torch.dtype) -> tuple[torch.dtype, tl.dtype]:
    """The accumulation dtype for inputs of ``dtype`` (torch's and Triton's name of it)."""
    return (torch.float64, tl.float64) if dtype == torch.float64 else (torch.float32, tl.float32)


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
    out = q.new_empty((batch, hq, wq, heads, cv))
    attn = q.new_empty((batch, hq, wq, heads, (2 * radius + 2) ** 2) if need_attn else (0,))
    rows = batch * hq * wq * heads
    settings = _launch_settings(rows, channels, cv)
    with _on_device(q):
        _forward_kernel[(triton.cdiv(rows, settings["BLOCK"]),)](
            q, k, v, rel_pos, _params(q, k, radius, scale), out, attn if need_attn else out,
            rows, hq, wq, hk, wk, heads, rel_pos.shape[3], channels, cv, RADIUS=radius, L1=l1,
            NEED_ATTN=need_attn, ACC=_accumulator(q.dtype)[1], **settings)
    return out, attn


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
    grad_q = torch.empty_like(q)
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
    return grad_q, grad_k.to(k.dtype), grad_v.to(v.dtype), grad_rel.to(rel_pos.dtype)
