"""Fused MatchAttention kernels in Triton (the ``triton`` backend, :mod:`.gpu`).

Layout as the C++ kernels (``csrc/``): q ``[B, Hq, Wq, h, C]``, k ``[B, Hk, Wk, h, C]``,
v ``[B, Hk, Wk, h, Cv]``, rel_pos ``[B, Hq, Wq, h or 1, 2]`` (x, y), made contiguous. The
semantics are those of :mod:`crossview.attention.match.reference`.

Shaped for a GPU, and for a compile of seconds: nothing is unrolled over the window.

- One program handles ``BLOCK`` rows of the flattened ``[B * Hq * Wq * h]`` (query, head)
  pairs. The window's ``S = (2r+2)^2`` keys are a tensor dimension (padded to ``S_PAD``, a power
  of two) and the channels a runtime loop over chunks of ``CHUNK``: every key or value load is
  one ``[BLOCK, S_PAD, CHUNK]`` tile, ``CHUNK`` contiguous channels per key.
- Forward: the scores ``[BLOCK, S_PAD]`` (a loop over the channels of q and k); the four
  BilinearSoftmax corners (nw, ne, sw, se) as masked reductions of ``[BLOCK, 4, S_PAD]``, each
  corner with its own max, so no corner underflows however far its scores lie below the
  others' (the C++ kernel needs a fallback shift for that); the mixed weights ``a_j``, written
  as one ``[BLOCK, S]`` tile when asked for; then ``out = sum_j a_j v_j``, a loop over the
  channels of v that writes each chunk. No window is materialised in memory.
- Backward, two kernels and no atomics. Per query (:func:`_backward_rows_kernel`): the scores
  and corner probabilities again, ``g_j = grad_out . v_j + grad_attn_j``, the corner gradients
  ``G_c = sum_j p_c(j) g_j``, the score gradients ``ds_j = scale sum_c w_c p_c(j) (g_j - G_c)``,
  ``grad_q`` and each row's ``grad_rel_pos`` (from the bilinear weights, as the C++ kernel,
  zero where the clamp moved the centre; heads sharing rel_pos are summed by torch). It writes
  each (query, key) pair's ``ds_j``, ``a_j`` and key index. The pairs are sorted by key (a
  stable ``torch.sort``) and a kernel over keys (:func:`_backward_keys_kernel`) sums each key's
  pairs into ``grad_k`` and ``grad_v``: one program owns each key's sum, so nothing waits on
  atomics and the gradients are the same bits on every run.

Every sum runs in float32 (float64 for float64 inputs); bfloat16 and float16 are read and
written in their own dtype. Shape arguments are not specialised (``do_not_specialize``), so a
new image size reuses the compiled kernels; a kernel is compiled once per (radius, channels,
dtype, similarity) and kept in Triton's cache (see :mod:`.gpu_compile`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import torch
import triton
import triton.language as tl

from crossview.attention.match.gpu_launch_cache import needs_compile
from crossview.long_step import long_step

# Triton decides at decoration time whether ``@triton.jit`` builds GPU kernels or interpreted
# ones (``TRITON_INTERPRET=1``, numpy on CPU tensors), so this is what the kernels below are.
INTERPRETED: bool = bool(triton.knobs.runtime.interpret)
# Channels per head (C and Cv) the key kernel of the backward keeps in registers.
MAX_CHANNELS = 256
# Triton's interpreter converts float32 to bfloat16 by truncation (and its round-to-nearest
# path mishandles the carry into the exponent), where a GPU rounds to nearest. Under the
# interpreter the kernels therefore write their bfloat16 and float16 outputs in float32 and
# torch rounds them to nearest, as the GPU's own conversion does.
STAGE_OUTPUTS_IN_FLOAT32 = INTERPRETED
# Elements of one [BLOCK, S_PAD, CHUNK] tile. On a GPU 2048 float32 values are 16 registers per
# thread of 4 warps (ptxas, sm_80 and sm_90: 40-138 registers per thread in all, no spills, for
# every variant of the published models; 4096 took up to 195); the interpreter runs programs
# one after another in Python, so there large tiles (few programs) keep it fast.
GPU_TILE = 2048
INTERPRETER_TILE = 2**20
NUM_WARPS = 4
# Channels per key in one load on a GPU: 64 bytes of float32, 32 of float16.
GPU_CHUNK = 16
# Window keys (rows times S_PAD) per program on a GPU: the per-row state (scores, four corner
# softmaxes, weights) grows with it (at 256, 16 rows of r=1, ptxas spilled).
GPU_WINDOWS = 128
# No software pipelining of the channel loops (a few iterations; the tile's loads are already
# independent of one another): fewer registers and a faster compile.
NUM_STAGES = 1
# Keys per program of the backward's key kernel times their padded channels.
GPU_KEY_TILE = 512
# Shape arguments are not specialised: Triton would otherwise compile again for every image
# size whose dimensions differ in divisibility by 16 or equal 1.
_SHAPES = ["n_rows", "Hq", "Wq", "Hk", "Wk", "heads", "rel_heads"]

log = logging.getLogger(__name__)


@triton.jit
def _rows(rel_ptr, params_ptr, n_rows, Hq, Wq, heads, rel_heads, RADIUS: tl.constexpr,
          BLOCK: tl.constexpr, ACC: tl.constexpr):
    """This program's rows: their mask and int64 index, batch and head (int64), rel_pos row,
    window origin (x, y), the centre's fractional part (fx, fy), whether the clamp left each
    coordinate alone, and the score scale."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < n_rows
    row64 = rows.to(tl.int64)
    h = row64 % heads
    n = row64 // heads
    x = n % Wq
    y = (n // Wq) % Hq
    b = n // Wq // Hq
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
    return (row_mask, row64, b, h, rel_index, corner_x.to(tl.int64) - RADIUS,
            corner_y.to(tl.int64) - RADIUS, cx - corner_x, cy - corner_y, free_x, free_y,
            tl.load(params_ptr))


@triton.jit
def _window(b, h, ox, oy, row_mask, Hk, Wk, heads, RADIUS: tl.constexpr, S_PAD: tl.constexpr):
    """The window as a tensor dimension: flat index ``j [S_PAD]`` (row-major over (dy, dx)),
    its (dy, dx), each row's key rows ``[BLOCK, S_PAD]`` (int64, into the ``[B * Hk * Wk * h]``
    keys) and their mask (real rows, ``j < S``)."""
    SIDE: tl.constexpr = 2 * RADIUS + 2
    j = tl.arange(0, S_PAD)
    dy = j // SIDE
    dx = j % SIDE
    key = ((b[:, None] * Hk + oy[:, None] + dy[None, :]) * Wk + ox[:, None] + dx[None, :]) \
        * heads + h[:, None]
    return j, dy, dx, key, row_mask[:, None] & (j < SIDE * SIDE)[None, :]


@triton.jit
def _holds(dy, dx, RADIUS: tl.constexpr):
    """``[4, S_PAD]``: which keys the ``(2r+1)^2`` sub-window of each corner (nw, ne, sw, se)
    holds; none of the padding (``dy >= 2r+2`` there)."""
    SIDE: tl.constexpr = 2 * RADIUS + 2
    corner = tl.arange(0, 4)
    in_x = dx[None, :] - (corner % 2)[:, None]  # the key's column in each corner's sub-window
    in_y = dy[None, :] - (corner // 2)[:, None]
    return (in_x >= 0) & (in_x <= SIDE - 2) & (in_y >= 0) & (in_y <= SIDE - 2)


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
def _scores(q_ptr, k_ptr, q_rows, k_rows, row_mask, mask, C, scale, L1: tl.constexpr,
            BLOCK: tl.constexpr, S_PAD: tl.constexpr, CHUNK: tl.constexpr, ACC: tl.constexpr):
    """Scores ``[BLOCK, S_PAD]`` of each row's window: scale times the negative L1 distance or
    the dot product, summed over the channels chunk by chunk (``q_rows``, ``k_rows``: element
    offsets of the rows' queries and their window's keys)."""
    s = tl.zeros([BLOCK, S_PAD], ACC)
    for c0 in tl.range(0, C, CHUNK):
        cc = _chunk(c0, CHUNK)
        in_c = cc < C
        qc = tl.load(q_ptr + q_rows[:, None] + cc[None, :],
                     mask=row_mask[:, None] & in_c[None, :], other=0).to(ACC)
        kc = tl.load(k_ptr + k_rows[:, :, None] + cc[None, None, :],
                     mask=mask[:, :, None] & in_c[None, None, :], other=0).to(ACC)
        if L1:
            s -= tl.sum(tl.abs(qc[:, None, :] - kc), axis=2)
        else:
            s += tl.sum(qc[:, None, :] * kc, axis=2)
    return s * scale


@triton.jit
def _chunk(c0, CHUNK: tl.constexpr):
    """Channels ``c0 .. c0 + CHUNK - 1`` (c0 a multiple of CHUNK: contiguous, aligned)."""
    return tl.max_contiguous(tl.multiple_of(c0 + tl.arange(0, CHUNK), CHUNK), CHUNK)


@triton.jit
def _offsets(row64, key, C, CV, C_ALIGN: tl.constexpr, CV_ALIGN: tl.constexpr):
    """Element offsets of the rows' q (and grad_q), of their window's keys, of those keys'
    values and of the rows' outputs (and grad_out); each a multiple of its row length's
    largest power-of-two divisor (up to 16), which lets loads be vectorised."""
    return (tl.multiple_of(row64 * C, C_ALIGN), tl.multiple_of(key * C, [C_ALIGN, C_ALIGN]),
            tl.multiple_of(key * CV, [CV_ALIGN, CV_ALIGN]), tl.multiple_of(row64 * CV, CV_ALIGN))


@triton.jit
def _corner_probs(s, holds):
    """``[BLOCK, 4, S_PAD]``: each corner's softmax over the keys its sub-window holds (0
    elsewhere), each with its own max."""
    s4 = tl.where(holds[None, :, :], s[:, None, :], float("-inf"))
    top = tl.max(s4, axis=2)
    e = tl.exp(s4 - top[:, :, None])  # exp(-inf) = 0 outside the sub-window
    return e / tl.sum(e, axis=2)[:, :, None]


@triton.jit(do_not_specialize=[*_SHAPES, "need_attn"])
def _forward_kernel(q_ptr, k_ptr, v_ptr, rel_ptr, params_ptr, out_ptr, attn_ptr, n_rows,
                    Hq, Wq, Hk, Wk, heads, rel_heads, C, CV, need_attn,
                    RADIUS: tl.constexpr, L1: tl.constexpr, BLOCK: tl.constexpr,
                    S_PAD: tl.constexpr, CHUNK: tl.constexpr, C_ALIGN: tl.constexpr,
                    CV_ALIGN: tl.constexpr, ACC: tl.constexpr):
    S: tl.constexpr = (2 * RADIUS + 2) * (2 * RADIUS + 2)
    row_mask, row64, b, h, _, ox, oy, fx, fy, _, _, scale = _rows(
        rel_ptr, params_ptr, n_rows, Hq, Wq, heads, rel_heads, RADIUS, BLOCK, ACC)
    j, dy, dx, key, mask = _window(b, h, ox, oy, row_mask, Hk, Wk, heads, RADIUS, S_PAD)
    q_rows, k_rows, v_rows, out_rows = _offsets(row64, key, C, CV, C_ALIGN, CV_ALIGN)
    s = _scores(q_ptr, k_ptr, q_rows, k_rows, row_mask, mask, C, scale, L1, BLOCK, S_PAD,
                CHUNK, ACC)
    weights, _, _ = _bilinear(fx, fy)
    mixed = tl.sum(weights[:, :, None] * _corner_probs(s, _holds(dy, dx, RADIUS)), axis=1)
    if need_attn != 0:
        tl.store(attn_ptr + row64[:, None] * S + j[None, :],
                 mixed.to(attn_ptr.dtype.element_ty), mask=mask)
    for c0 in tl.range(0, CV, CHUNK):
        cv = _chunk(c0, CHUNK)
        in_c = cv < CV
        vc = tl.load(v_ptr + v_rows[:, :, None] + cv[None, None, :],
                     mask=mask[:, :, None] & in_c[None, None, :], other=0).to(ACC)
        out = tl.sum(mixed[:, :, None] * vc, axis=1)
        tl.store(out_ptr + out_rows[:, None] + cv[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=row_mask[:, None] & in_c[None, :])


@triton.jit(do_not_specialize=[*_SHAPES, "has_grad_attn"])
def _backward_rows_kernel(q_ptr, k_ptr, v_ptr, rel_ptr, params_ptr, grad_out_ptr,
                          grad_attn_ptr, grad_q_ptr, ds_ptr, mixed_ptr, key_ptr, grad_rel_ptr,
                          n_rows, Hq, Wq, Hk, Wk, heads, rel_heads, C, CV, has_grad_attn,
                          RADIUS: tl.constexpr, L1: tl.constexpr, BLOCK: tl.constexpr,
                          S_PAD: tl.constexpr, CHUNK: tl.constexpr, C_ALIGN: tl.constexpr,
                          CV_ALIGN: tl.constexpr, ACC: tl.constexpr):
    S: tl.constexpr = (2 * RADIUS + 2) * (2 * RADIUS + 2)
    row_mask, row64, b, h, _, ox, oy, fx, fy, free_x, free_y, scale = _rows(
        rel_ptr, params_ptr, n_rows, Hq, Wq, heads, rel_heads, RADIUS, BLOCK, ACC)
    j, dy, dx, key, mask = _window(b, h, ox, oy, row_mask, Hk, Wk, heads, RADIUS, S_PAD)
    q_rows, k_rows, v_rows, out_rows = _offsets(row64, key, C, CV, C_ALIGN, CV_ALIGN)
    s = _scores(q_ptr, k_ptr, q_rows, k_rows, row_mask, mask, C, scale, L1, BLOCK, S_PAD,
                CHUNK, ACC)
    probs = _corner_probs(s, _holds(dy, dx, RADIUS))
    weights, dw_dfx, dw_dfy = _bilinear(fx, fy)
    # g_j: the gradient of key j's mixed weight.
    g = tl.zeros([BLOCK, S_PAD], ACC)
    for c0 in tl.range(0, CV, CHUNK):
        cv = _chunk(c0, CHUNK)
        in_c = cv < CV
        go = tl.load(grad_out_ptr + out_rows[:, None] + cv[None, :],
                     mask=row_mask[:, None] & in_c[None, :], other=0).to(ACC)
        vc = tl.load(v_ptr + v_rows[:, :, None] + cv[None, None, :],
                     mask=mask[:, :, None] & in_c[None, None, :], other=0).to(ACC)
        g += tl.sum(go[:, None, :] * vc, axis=2)
    if has_grad_attn != 0:
        g += tl.load(grad_attn_ptr + row64[:, None] * S + j[None, :], mask=mask,
                     other=0).to(ACC)
    corner_grad = tl.sum(probs * g[:, None, :], axis=2)  # G_c [BLOCK, 4]
    ds = tl.sum(weights[:, :, None] * probs * (g[:, None, :] - corner_grad[:, :, None]),
                axis=1) * scale
    for c0 in tl.range(0, C, CHUNK):
        cc = _chunk(c0, CHUNK)
        in_c = cc < C
        c_mask = row_mask[:, None] & in_c[None, :]
        kc = tl.load(k_ptr + k_rows[:, :, None] + cc[None, None, :],
                     mask=mask[:, :, None] & in_c[None, None, :], other=0).to(ACC)
        if L1:
            qc = tl.load(q_ptr + q_rows[:, None] + cc[None, :], mask=c_mask, other=0).to(ACC)
            diff = qc[:, None, :] - kc
            gq = -tl.sum(ds[:, :, None] * ((diff > 0).to(ACC) - (diff < 0).to(ACC)), axis=1)
        else:
            gq = tl.sum(ds[:, :, None] * kc, axis=1)
        tl.store(grad_q_ptr + q_rows[:, None] + cc[None, :],
                 gq.to(grad_q_ptr.dtype.element_ty), mask=c_mask)
    pair = row64[:, None] * S + j[None, :]
    tl.store(ds_ptr + pair, ds, mask=mask)
    tl.store(mixed_ptr + pair, tl.sum(weights[:, :, None] * probs, axis=1), mask=mask)
    tl.store(key_ptr + pair, key.to(tl.int32), mask=mask)
    # The centre's gradient through the bilinear weights (dL/dw_c = G_c).
    dfx = tl.sum(corner_grad * dw_dfx, axis=1)
    dfy = tl.sum(corner_grad * dw_dfy, axis=1)
    tl.store(grad_rel_ptr + row64 * 2, tl.where(free_x, dfx, 0.0), mask=row_mask)
    tl.store(grad_rel_ptr + row64 * 2 + 1, tl.where(free_y, dfy, 0.0), mask=row_mask)


@triton.jit(do_not_specialize=["n_keys", "window"])
def _backward_keys_kernel(q_ptr, k_ptr, grad_out_ptr, ds_ptr, mixed_ptr, order_ptr, starts_ptr,
                          grad_k_ptr, grad_v_ptr, n_keys, window, C, CV, L1: tl.constexpr,
                          BLOCK: tl.constexpr, C_PAD: tl.constexpr, CV_PAD: tl.constexpr,
                          C_ALIGN: tl.constexpr, CV_ALIGN: tl.constexpr, ACC: tl.constexpr):
    """``grad_k`` and ``grad_v`` of ``BLOCK`` keys: the sum over the (query, key) pairs that
    ``order[starts[key]:starts[key + 1]]`` lists (pair = query row * window + j)."""
    keys = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    key_mask = keys < n_keys
    key64 = keys.to(tl.int64)
    start = tl.load(starts_ptr + key64, mask=key_mask, other=0)
    end = tl.load(starts_ptr + key64 + 1, mask=key_mask, other=0)
    cc = tl.arange(0, C_PAD)
    cv = tl.arange(0, CV_PAD)
    c_mask = (cc < C)[None, :]
    cv_mask = (cv < CV)[None, :]
    k_rows = tl.multiple_of(key64 * C, C_ALIGN)
    v_rows = tl.multiple_of(key64 * CV, CV_ALIGN)
    gk = tl.zeros([BLOCK, C_PAD], ACC)
    gv = tl.zeros([BLOCK, CV_PAD], ACC)
    if L1:
        kt = tl.load(k_ptr + k_rows[:, None] + cc[None, :], mask=key_mask[:, None] & c_mask,
                     other=0).to(ACC)
    for i in tl.range(0, tl.max(end - start, axis=0)):
        at = start + i
        live = at < end
        # an address inside the array instead of a mask: Triton 3.6's layout pass gives a
        # masked load here a mask in another layout than its pointer and fails to compile
        # (the pairs of dead lanes add zero below; some lane is live, so order[0] exists)
        pair = tl.load(order_ptr + tl.maximum(tl.minimum(at, end - 1), 0))
        row = pair // window
        q_rows = tl.multiple_of(row * C, C_ALIGN)
        out_rows = tl.multiple_of(row * CV, CV_ALIGN)
        ds = tl.load(ds_ptr + pair, mask=live, other=0)
        qt = tl.load(q_ptr + q_rows[:, None] + cc[None, :], mask=live[:, None] & c_mask,
                     other=0).to(ACC)
        if L1:
            diff = qt - kt
            gk += ds[:, None] * ((diff > 0).to(ACC) - (diff < 0).to(ACC))
        else:
            gk += ds[:, None] * qt
        go = tl.load(grad_out_ptr + out_rows[:, None] + cv[None, :],
                     mask=live[:, None] & cv_mask, other=0).to(ACC)
        gv += tl.load(mixed_ptr + pair, mask=live, other=0)[:, None] * go
    tl.store(grad_k_ptr + k_rows[:, None] + cc[None, :], gk.to(grad_k_ptr.dtype.element_ty),
             mask=key_mask[:, None] & c_mask)
    tl.store(grad_v_ptr + v_rows[:, None] + cv[None, :], gv.to(grad_v_ptr.dtype.element_ty),
             mask=key_mask[:, None] & cv_mask)


def accumulator(dtype: torch.dtype) -> tuple[torch.dtype, tl.dtype]:
    """The accumulation dtype for inputs of ``dtype`` (torch's and Triton's name of it)."""
    return (torch.float64, tl.float64) if dtype == torch.float64 else (torch.float32, tl.float32)


def _written(dtype: torch.dtype) -> torch.dtype:
    """The dtype the kernels write outputs of ``dtype`` in (see STAGE_OUTPUTS_IN_FLOAT32)."""
    return accumulator(dtype)[0] if STAGE_OUTPUTS_IN_FLOAT32 else dtype


def _params(q: torch.Tensor, k: torch.Tensor, radius: int, scale: float) -> torch.Tensor:
    """``[scale, upper x clamp, upper y clamp]`` in the accumulation dtype. A tensor rather than
    scalar arguments: Triton passes Python floats as float32, and float64 inputs need them
    exact (computed in double, as the reference does, then rounded once)."""
    _, hk, wk, _, _ = k.shape
    return torch.tensor([scale, wk - 1 - radius - 1e-3, hk - 1 - radius - 1e-3],
                        dtype=accumulator(q.dtype)[0], device=q.device)


def alignment(channels: int) -> int:
    """The largest power of two (up to 16) dividing ``channels``: the kernels tell Triton that
    row offsets are multiples of it, so that loads of a head's channels can be vectorised
    (Triton's own specialisation only knows divisibility by 16)."""
    return min(16, channels & -channels)


def row_settings(rows: int, channels: int, cv: int, radius: int, dtype: torch.dtype,
                 interpreted: bool = INTERPRETED) -> dict[str, int]:
    """Constexprs of the row kernels (forward, backward rows) but the radius, similarity and
    accumulator: ``BLOCK`` rows per program, ``S_PAD`` window keys (a power of two, as
    ``tl.arange`` needs) and ``CHUNK`` channels per load, for a ``[BLOCK, S_PAD, CHUNK]`` tile
    of about :data:`GPU_TILE` values (half as many in float64: two registers each)."""
    s_pad = triton.next_power_of_2((2 * radius + 2) ** 2)
    widest = triton.next_power_of_2(max(channels, cv))
    if interpreted:
        chunk = min(widest, 64)
        block = min(triton.next_power_of_2(rows), max(1, INTERPRETER_TILE // (s_pad * chunk)))
        return {"BLOCK": block, "S_PAD": s_pad, "CHUNK": chunk, "C_ALIGN": alignment(channels),
                "CV_ALIGN": alignment(cv)}
    tile = GPU_TILE // (2 if dtype == torch.float64 else 1)
    chunk = min(GPU_CHUNK, max(1, tile // s_pad))  # narrower heads: masked channels
    block = max(1, min(tile // (s_pad * chunk), GPU_WINDOWS // s_pad))
    return {"BLOCK": block, "S_PAD": s_pad, "CHUNK": chunk, "C_ALIGN": alignment(channels),
            "CV_ALIGN": alignment(cv)}


def key_settings(keys: int, channels: int, cv: int, dtype: torch.dtype,
                 interpreted: bool = INTERPRETED) -> dict[str, int]:
    """Constexprs of the backward's key kernel but the similarity and accumulator: ``BLOCK``
    keys per program and the channel paddings ``C_PAD`` and ``CV_PAD``."""
    c_pad, cv_pad = triton.next_power_of_2(channels), triton.next_power_of_2(cv)
    if interpreted:
        block = min(triton.next_power_of_2(keys), 2048)
    else:
        tile = GPU_KEY_TILE // (2 if dtype == torch.float64 else 1)
        block = max(1, min(64, tile // max(c_pad, cv_pad)))
    return {"BLOCK": block, "C_PAD": c_pad, "CV_PAD": cv_pad, "C_ALIGN": alignment(channels),
            "CV_ALIGN": alignment(cv)}


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


def forward_launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
                   params: torch.Tensor, out: torch.Tensor, attn: torch.Tensor | None,
                   radius: int, l1: bool) -> tuple[tuple[int], tuple, dict]:
    """Grid, arguments and keyword arguments of :func:`_forward_kernel` (``params`` from
    :func:`_params`; ``attn`` ``None``: the weights are not written). Tensors may be Triton's
    ``MockTensor`` where only the signature matters (:mod:`.gpu_compile`)."""
    batch, hq, wq, heads, channels = q.shape
    _, hk, wk, _, cv = v.shape
    rows = batch * hq * wq * heads
    settings = row_settings(rows, channels, cv, radius, q.dtype)
    args = (q, k, v, rel_pos, params, out, out if attn is None else attn, rows, hq, wq, hk, wk,
            heads, rel_pos.shape[3], channels, cv, int(attn is not None))
    kwargs = {"RADIUS": radius, "L1": l1, "ACC": accumulator(q.dtype)[1], **settings,
              **_options()}
    return (triton.cdiv(rows, settings["BLOCK"]),), args, kwargs


def backward_rows_launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         rel_pos: torch.Tensor, params: torch.Tensor, grad_out: torch.Tensor,
                         grad_attn: torch.Tensor | None, grad_q: torch.Tensor,
                         ds: torch.Tensor, mixed: torch.Tensor, keys: torch.Tensor,
                         grad_rel: torch.Tensor, radius: int,
                         l1: bool) -> tuple[tuple[int], tuple, dict]:
    """Grid, arguments and keyword arguments of :func:`_backward_rows_kernel`."""
    batch, hq, wq, heads, channels = q.shape
    _, hk, wk, _, cv = v.shape
    rows = batch * hq * wq * heads
    settings = row_settings(rows, channels, cv, radius, q.dtype)
    args = (q, k, v, rel_pos, params, grad_out, grad_out if grad_attn is None else grad_attn,
            grad_q, ds, mixed, keys, grad_rel, rows, hq, wq, hk, wk, heads, rel_pos.shape[3],
            channels, cv, int(grad_attn is not None))
    kwargs = {"RADIUS": radius, "L1": l1, "ACC": accumulator(q.dtype)[1], **settings,
              **_options()}
    return (triton.cdiv(rows, settings["BLOCK"]),), args, kwargs


def backward_keys_launch(q: torch.Tensor, k: torch.Tensor, grad_out: torch.Tensor,
                         ds: torch.Tensor, mixed: torch.Tensor, order: torch.Tensor,
                         starts: torch.Tensor, grad_k: torch.Tensor, grad_v: torch.Tensor,
                         window: int, l1: bool) -> tuple[tuple[int], tuple, dict]:
    """Grid, arguments and keyword arguments of :func:`_backward_keys_kernel`."""
    batch, hk, wk, heads, channels = k.shape
    cv = grad_v.shape[-1]
    keys = batch * hk * wk * heads
    settings = key_settings(keys, channels, cv, q.dtype)
    args = (q, k, grad_out, ds, mixed, order, starts, grad_k, grad_v, keys, window, channels,
            cv)
    kwargs = {"L1": l1, "ACC": accumulator(q.dtype)[1], **settings, **_options()}
    return (triton.cdiv(keys, settings["BLOCK"]),), args, kwargs


def _options() -> dict:
    """Compile options of every launch (none under the interpreter, which takes none)."""
    if INTERPRETED:
        return {}
    return {"num_warps": NUM_WARPS, "num_stages": NUM_STAGES, "enable_fp_fusion": True}


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
            radius: int, l1: bool, scale: float, need_attn: bool,
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused forward: ``out [B, Hq, Wq, h, Cv]`` and the mixed weights
    ``[B, Hq, Wq, h, (2r+2)^2]`` (an empty ``[0]`` tensor unless ``need_attn``), in q's dtype.
    Inputs validated and finite (see :func:`crossview.attention.match.match_attention`)."""
    q, k, v, rel_pos = (t.contiguous() for t in (q, k, v, rel_pos))
    batch, hq, wq, heads, _ = q.shape
    cv = v.shape[-1]
    out = q.new_empty((batch, hq, wq, heads, cv), dtype=_written(q.dtype))
    attn = q.new_empty((batch, hq, wq, heads, (2 * radius + 2) ** 2) if need_attn else (0,),
                       dtype=_written(q.dtype))
    grid, args, kwargs = forward_launch(q, k, v, rel_pos, _params(q, k, radius, scale), out,
                                        attn if need_attn else None, radius, l1)
    with _on_device(q), _note_compile(_forward_kernel, args, kwargs):
        _forward_kernel[grid](*args, **kwargs)
    return out.to(q.dtype), attn.to(q.dtype)


def backward(grad_out: torch.Tensor, grad_attn: torch.Tensor | None, q: torch.Tensor,
             k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor, radius: int, l1: bool,
             scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fused backward: gradients of q, k, v and rel_pos (their shapes and dtype) for upstream
    gradients ``grad_out [B, Hq, Wq, h, Cv]`` and ``grad_attn [B, Hq, Wq, h, (2r+2)^2]``
    (``None``: the weights were not used). Deterministic: no atomic adds.

    Besides the gradients it allocates, per (query, head) and window key, the score gradient
    and mixed weight (accumulation dtype), the key's index and its place in the sort (int32 and
    int64): 24 bytes per pair in float32, ``B * Hq * Wq * h * (2r+2)^2`` pairs."""
    q, k, v, rel_pos, grad_out = (t.contiguous() for t in (q, k, v, rel_pos, grad_out))
    if grad_attn is not None:
        grad_attn = grad_attn.contiguous()
    batch, hq, wq, heads, _ = q.shape
    n_keys = k.shape[0] * k.shape[1] * k.shape[2] * heads
    if n_keys >= 2**31:
        raise ValueError(f"the triton MatchAttention backward indexes keys in int32, got "
                         f"{k.shape=}")
    window = (2 * radius + 2) ** 2
    acc = accumulator(q.dtype)[0]
    pairs = batch * hq * wq * heads * window
    grad_q = torch.empty_like(q, dtype=_written(q.dtype))
    ds = q.new_empty(pairs, dtype=acc)
    mixed = q.new_empty(pairs, dtype=acc)
    keys = q.new_empty(pairs, dtype=torch.int32)
    grad_rel = q.new_empty((batch, hq, wq, heads, 2), dtype=acc)
    grid, args, kwargs = backward_rows_launch(q, k, v, rel_pos, _params(q, k, radius, scale),
                                              grad_out, grad_attn, grad_q, ds, mixed, keys,
                                              grad_rel, radius, l1)
    with _on_device(q):
        with _note_compile(_backward_rows_kernel, args, kwargs):
            _backward_rows_kernel[grid](*args, **kwargs)
        # Each key's pairs side by side, in query order (a stable sort: the same sums each run).
        sorted_keys, order = torch.sort(keys, stable=True)
        starts = torch.searchsorted(sorted_keys, torch.arange(
            n_keys + 1, dtype=torch.int32, device=q.device))
        grad_k = torch.empty_like(k, dtype=_written(k.dtype))
        grad_v = torch.empty_like(v, dtype=_written(v.dtype))
        grid, args, kwargs = backward_keys_launch(q, k, grad_out, ds, mixed, order, starts,
                                                  grad_k, grad_v, window, l1)
        with _note_compile(_backward_keys_kernel, args, kwargs):
            _backward_keys_kernel[grid](*args, **kwargs)
    if rel_pos.shape[3] != heads:  # one rel_pos shared by the heads: their gradients add up
        grad_rel = grad_rel.sum(dim=3, keepdim=True)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype), grad_rel.to(rel_pos.dtype)


_told = False


@contextlib.contextmanager
def _note_compile(kernel: triton.runtime.JITFunction, args: tuple, kwargs: dict
                  ) -> Iterator[None]:
    """Around a launch of ``kernel``: when it is the first launch in this process that Triton
    must compile (neither in memory nor in Triton's cache on disk), log ``compiling the GPU
    kernels, once`` (INFO, logger ``crossview...``; the CLI shows it as a note) and show a
    spinner while it compiles and runs (:func:`crossview.long_step.long_step`)."""
    global _told
    if _told or INTERPRETED or not needs_compile(kernel, args, kwargs):
        yield
        return
    _told = True
    with long_step("compiling the GPU kernels, once", logger=log):
        yield
