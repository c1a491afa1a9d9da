"""Proofs by test of camera-conditioned attention, in float64, against the pairwise formula.

The reference builds each token's full ``D x D`` map ``T_t`` explicitly (block-diagonal: ``D/8``
copies of the 4x4 camera matrix, then the two split-halves RoPE rotations) and evaluates
``o_t = T_t sum_t' softmax(q_t^T T_t T_t'^-1 k_t' / sqrt(D)) T_t'^-1 v_t'`` over all token pairs
with numerical matrix inverses (paper Eq. 16).
"""

from __future__ import annotations

import math

import pytest
import torch

from crossview.attention.camera import camera_transforms, prope_attention
from crossview.attention.rope import grid_positions
from crossview.geometry.cameras import random_se3

F64 = torch.float64
IMAGE = (24, 36)  # (height, width): non-square on purpose
GRID = (2, 3)  # (h, w) patches of 12 x 12 pixels


def random_Ks(gen: torch.Generator, *shape: int) -> torch.Tensor:
    K = torch.zeros(*shape, 3, 3, dtype=F64)
    K[..., 0, 0] = 20 + 40 * torch.rand(shape, generator=gen, dtype=F64)
    K[..., 1, 1] = 20 + 40 * torch.rand(shape, generator=gen, dtype=F64)
    K[..., 0, 2] = 36 * torch.rand(shape, generator=gen, dtype=F64)
    K[..., 1, 2] = 24 * torch.rand(shape, generator=gen, dtype=F64)
    K[..., 2, 2] = 1.0
    return K


def camera_block(encoding: str, viewmat: torch.Tensor, K: torch.Tensor | None) -> torch.Tensor:
    if encoding == "prope" and K is not None:
        height, width = IMAGE
        K_norm = torch.tensor(
            [[K[0, 0] / width, K[0, 1] / width, K[0, 2] / width - 0.5],
             [0.0, K[1, 1] / height, K[1, 2] / height - 0.5],
             [0.0, 0.0, 1.0]], dtype=F64)
        lifted = torch.eye(4, dtype=F64)
        lifted[:3, :3] = K_norm
        return lifted @ viewmat
    if encoding in ("prope", "gta", "cape"):
        return viewmat
    return torch.eye(4, dtype=F64)


def rope_block(position: float, n: int) -> torch.Tensor:
    """The map T's RoPE block: the transpose of the forward split-halves rotation."""
    forward = torch.zeros(2 * n, 2 * n, dtype=F64)
    for i in range(n):
        angle = position * 100.0 ** (-i / n)
        c, s = math.cos(angle), math.sin(angle)
        forward[i, i], forward[i, i + n], forward[i + n, i], forward[i + n, i + n] = c, s, -s, c
    return forward.T


def token_maps(encoding: str, viewmats: torch.Tensor, Ks: torch.Tensor | None,
               positions: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``[B, T, D, D]``: token t of batch b uses camera ``t // (T / C)``."""
    batch, cameras = viewmats.shape[:2]
    tokens = positions.shape[-2]
    maps = torch.zeros(batch, tokens, head_dim, head_dim, dtype=F64)
    for b in range(batch):
        for t in range(tokens):
            c = t // (tokens // cameras)
            pos = positions[b, t] if positions.ndim == 3 else positions[t]
            cam = camera_block(encoding, viewmats[b, c], None if Ks is None else Ks[b, c])
            maps[b, t] = torch.block_diag(*[cam] * (head_dim // 8),
                                          rope_block(float(pos[0]), head_dim // 8),
                                          rope_block(float(pos[1]), head_dim // 8))
    return maps


def naive_attention(q, k, v, maps_q, maps_k, encoding, mask=None):
    if encoding == "none":
        maps_q = torch.eye(q.shape[-1], dtype=F64).expand(*maps_q.shape)
        maps_k = torch.eye(q.shape[-1], dtype=F64).expand(*maps_k.shape)
    inv_k = torch.linalg.inv(maps_k)
    relative = maps_q[:, :, None] @ inv_k[:, None, :]  # [B, Tq, Tk, D, D]
    scores = torch.einsum("bhid,bijde,bhje->bhij", q, relative, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if encoding == "cape":
        return weights @ v
    values = torch.einsum("bjde,bhje->bhjd", inv_k, v)
    return torch.einsum("bide,bhie->bhid", maps_q, weights @ values)


def setup(seed: int, cameras: int = 2, batch: int = 2, heads: int = 2, head_dim: int = 16,
          kv_cameras: int | None = None):
    gen = torch.Generator().manual_seed(seed)
    tokens = cameras * GRID[0] * GRID[1]
    kv_tokens = (kv_cameras or cameras) * GRID[0] * GRID[1]
    q = torch.randn(batch, heads, tokens, head_dim, generator=gen, dtype=F64)
    k, v = torch.randn(2, batch, heads, kv_tokens, head_dim, generator=gen, dtype=F64)
    viewmats = random_se3(batch, cameras, generator=gen, dtype=F64)
    Ks = random_Ks(gen, batch, cameras)
    return gen, q, k, v, viewmats, Ks


ENCODINGS = ["prope", "gta", "cape", "rope", "none"]


class TestPairwiseFormula:
    @pytest.mark.parametrize("encoding", ENCODINGS)
    def test_self_attention_equals_eq16(self, encoding: str) -> None:
        _, q, k, v, viewmats, Ks = setup(0)
        out = prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                              patch_grid=GRID, encoding=encoding)
        maps = token_maps(encoding, viewmats, Ks, grid_positions(GRID, 2), 16)
        torch.testing.assert_close(out, naive_attention(q, k, v, maps, maps, encoding),
                                   atol=1e-10, rtol=1e-10)

    @pytest.mark.parametrize("encoding", ["prope", "gta", "cape"])
    def test_cross_attention_between_camera_sets(self, encoding: str) -> None:
        gen, q, k, v, viewmats, Ks = setup(1, cameras=1, kv_cameras=3)
        kv_viewmats = random_se3(2, 3, generator=gen, dtype=F64)
        kv_Ks = random_Ks(gen, 2, 3)
        out = prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                              patch_grid=GRID, encoding=encoding, kv_viewmats=kv_viewmats,
                              kv_Ks=kv_Ks)
        maps_q = token_maps(encoding, viewmats, Ks, grid_positions(GRID, 1), 16)
        maps_k = token_maps(encoding, kv_viewmats, kv_Ks, grid_positions(GRID, 3), 16)
        torch.testing.assert_close(out, naive_attention(q, k, v, maps_q, maps_k, encoding),
                                   atol=1e-10, rtol=1e-10)

    def test_per_token_cameras_and_positions(self) -> None:
        gen, q, k, v, _, _ = setup(2)
        tokens = q.shape[2]
        viewmats = random_se3(2, tokens, generator=gen, dtype=F64)
        Ks = random_Ks(gen, 2, tokens)
        positions = torch.randint(0, 9, (2, tokens, 2), generator=gen)
        out = prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                              positions=positions)
        maps = token_maps("prope", viewmats, Ks, positions, 16)
        torch.testing.assert_close(out, naive_attention(q, k, v, maps, maps, "prope"),
                                   atol=1e-10, rtol=1e-10)

    def test_per_token_cameras_equal_per_camera_layout(self) -> None:
        _, q, k, v, viewmats, Ks = setup(3)
        per_camera = prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                                     patch_grid=GRID)
        repeat = GRID[0] * GRID[1]
        per_token = prope_attention(
            q, k, v, viewmats=viewmats.repeat_interleave(repeat, dim=1),
            Ks=Ks.repeat_interleave(repeat, dim=1), image_size=IMAGE,
            positions=grid_positions(GRID, 2))
        torch.testing.assert_close(per_token, per_camera, atol=1e-12, rtol=1e-12)

    def test_sdpa_arguments_pass_through(self) -> None:
        gen, q, k, v, viewmats, Ks = setup(4)
        mask = torch.rand(q.shape[2], k.shape[2], generator=gen) > 0.3
        mask.fill_diagonal_(True)
        out = prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                              patch_grid=GRID, attn_mask=mask)
        maps = token_maps("prope", viewmats, Ks, grid_positions(GRID, 2), 16)
        torch.testing.assert_close(out, naive_attention(q, k, v, maps, maps, "prope", mask),
                                   atol=1e-10, rtol=1e-10)
        causal = prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                                 patch_grid=GRID, is_causal=True)
        lower = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril()
        torch.testing.assert_close(causal, naive_attention(q, k, v, maps, maps, "prope", lower),
                                   atol=1e-10, rtol=1e-10)


class TestInvariances:
    @pytest.mark.parametrize("encoding", ["prope", "gta", "cape"])
    def test_global_se3_leaves_outputs_unchanged(self, encoding: str) -> None:
        gen, q, k, v, viewmats, Ks = setup(5, cameras=3)
        world_motion = random_se3(2, 1, generator=gen, dtype=F64, translation_scale=5.0)
        moved = viewmats @ torch.linalg.inv(world_motion)
        kwargs = dict(Ks=Ks, image_size=IMAGE, patch_grid=GRID, encoding=encoding)
        out = prope_attention(q, k, v, viewmats=viewmats, **kwargs)
        out_moved = prope_attention(q, k, v, viewmats=moved, **kwargs)
        torch.testing.assert_close(out_moved, out, atol=1e-9, rtol=0)
        one_camera_moved = viewmats.clone()
        one_camera_moved[:, 1] = moved[:, 1]
        assert not torch.allclose(prope_attention(q, k, v, viewmats=one_camera_moved, **kwargs),
                                  out, atol=1e-6)

    def test_identity_intrinsics_equal_se3_variant(self) -> None:
        _, q, k, v, viewmats, Ks = setup(6)
        height, width = IMAGE
        identity = torch.tensor([[width, 0.0, width / 2], [0.0, height, height / 2],
                                 [0.0, 0.0, 1.0]], dtype=F64).expand(2, 2, 3, 3)
        kwargs = dict(viewmats=viewmats, image_size=IMAGE, patch_grid=GRID)
        prope = prope_attention(q, k, v, Ks=identity, encoding="prope", **kwargs)
        gta = prope_attention(q, k, v, encoding="gta", **kwargs)
        torch.testing.assert_close(prope, gta, atol=1e-12, rtol=1e-12)
        with_Ks = prope_attention(q, k, v, Ks=Ks, encoding="prope", **kwargs)
        assert not torch.allclose(with_Ks, gta, atol=1e-6)

    @pytest.mark.parametrize("encoding", ["prope", "gta"])
    def test_single_camera_reduces_to_rope(self, encoding: str) -> None:
        _, q, k, v, viewmats, Ks = setup(7, cameras=1)
        kwargs = dict(viewmats=viewmats, Ks=Ks, image_size=IMAGE, patch_grid=GRID)
        torch.testing.assert_close(prope_attention(q, k, v, encoding=encoding, **kwargs),
                                   prope_attention(q, k, v, encoding="rope", **kwargs),
                                   atol=1e-10, rtol=1e-10)

    def test_gradients_through_inputs_and_cameras(self) -> None:
        _, q, k, v, viewmats, Ks = setup(8, batch=1, heads=1, head_dim=8)
        inputs = [x.requires_grad_() for x in (q, k, v, Ks)]

        def fn(q, k, v, Ks):
            return prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                                   patch_grid=GRID)

        assert torch.autograd.gradcheck(fn, inputs)


class TestTransforms:
    def test_cached_transforms_equal_direct_call(self) -> None:
        _, q, k, v, viewmats, Ks = setup(9)
        cache = camera_transforms(viewmats, Ks, head_dim=16, image_size=IMAGE, patch_grid=GRID)
        direct = prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                                 patch_grid=GRID)
        torch.testing.assert_close(prope_attention(q, k, v, transforms=cache), direct,
                                   atol=0, rtol=0)

    def test_float32_matches_float64(self) -> None:
        _, q, k, v, viewmats, Ks = setup(10)
        kwargs = dict(image_size=IMAGE, patch_grid=GRID)
        out64 = prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, **kwargs)
        out32 = prope_attention(q.float(), k.float(), v.float(), viewmats=viewmats.float(),
                                Ks=Ks.float(), **kwargs)
        assert out32.dtype == torch.float32
        torch.testing.assert_close(out32.double(), out64, atol=1e-4, rtol=1e-4)


class TestErrors:
    @pytest.mark.parametrize("head_dim", [4, 12, 20])
    def test_head_dim_that_does_not_fit(self, head_dim: int) -> None:
        _, q, k, v, viewmats, Ks = setup(11, head_dim=head_dim)
        with pytest.raises(ValueError, match=f"head_dim={head_dim} does not fit"):
            prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                            patch_grid=GRID)
        out = prope_attention(q, k, v, viewmats=viewmats, patch_grid=GRID, encoding="none")
        assert out.shape == q.shape

    def test_token_count_mismatch(self) -> None:
        _, q, k, v, viewmats, Ks = setup(12)
        message = r"18 tokens of head_dim 16, but q.shape=\(2, 2, 12, 16\)"
        with pytest.raises(ValueError, match=message):
            prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                            patch_grid=(3, 3))

    @pytest.mark.parametrize("encoding", ["prope", "gta", "cape", "rope"])
    def test_batch_mismatch_names_the_tensor(self, encoding: str) -> None:
        _, q, _, _, viewmats, _ = setup(14)
        three = torch.cat([q, q[:1]])  # batch 3 against cameras of batch 2
        positions = grid_positions(GRID, viewmats.shape[1]).expand(2, -1, -1)
        with pytest.raises(ValueError, match=r"batch of 2, but q.shape=\(3, "):
            prope_attention(three, three, three, viewmats=viewmats, positions=positions,
                            encoding=encoding)
        with pytest.raises(ValueError, match=r"batch of 2, but k.shape=\(3, "):
            prope_attention(three, three, three, transforms=camera_transforms(
                viewmats[:1], head_dim=16, encoding=encoding, patch_grid=GRID),
                kv_transforms=camera_transforms(viewmats, head_dim=16, encoding=encoding,
                                                positions=positions))
        # a batch of 1 broadcasts
        out = prope_attention(three, three, three, viewmats=viewmats[:1], patch_grid=GRID,
                              encoding=encoding)
        assert out.shape == three.shape

    def test_unknown_encoding_and_missing_arguments(self) -> None:
        _, q, k, v, viewmats, Ks = setup(13)
        with pytest.raises(ValueError, match="unknown camera encoding"):
            prope_attention(q, k, v, viewmats=viewmats, patch_grid=GRID, encoding="plucker")
        with pytest.raises(ValueError, match="image_size"):
            prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, patch_grid=GRID)
        with pytest.raises(ValueError, match="kv_Ks"):
            prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=IMAGE,
                            patch_grid=GRID, kv_viewmats=viewmats)
        with pytest.raises(ValueError, match=r"q.shape=\(2, 12, 16\)"):
            prope_attention(q[0], k, v, viewmats=viewmats, patch_grid=GRID)
