from __future__ import annotations

import math

import pytest
import torch

from crossview.geometry.warp import backward_warp, disparity_to_flow, warp_by_disparity


def naive_bilinear(image: torch.Tensor, x: float, y: float) -> torch.Tensor:
    """Explicit bilinear interpolation of ``image [C, H, W]`` at ``(x, y)``, zeros outside."""
    c, h, w = image.shape
    x0, y0 = math.floor(x), math.floor(y)
    out = torch.zeros(c, dtype=image.dtype)
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= xx < w and 0 <= yy < h:
                out += wx * wy * image[:, yy, xx]
    return out


class TestBackwardWarp:
    def test_matches_naive_formula(self) -> None:
        g = torch.Generator().manual_seed(0)
        image = torch.rand(2, 3, 5, 7, generator=g, dtype=torch.float64)
        flow = torch.randn(2, 2, 5, 7, generator=g, dtype=torch.float64) * 2
        warped, inside = backward_warp(image, flow)
        for b in range(2):
            for y in range(5):
                for x in range(7):
                    px, py = x + flow[b, 0, y, x].item(), y + flow[b, 1, y, x].item()
                    ref = naive_bilinear(image[b], px, py)
                    torch.testing.assert_close(warped[b, :, y, x], ref)
                    assert inside[b, y, x].item() == (0 <= px <= 6 and 0 <= py <= 4)

    @pytest.mark.parametrize("size", [(1, 1), (1, 4), (3, 1)])
    def test_single_row_or_column_matches_naive_formula(self, size: tuple[int, int]) -> None:
        g = torch.Generator().manual_seed(1)
        image = torch.rand(1, 2, *size, generator=g, dtype=torch.float64)
        flow = torch.randn(1, 2, *size, generator=g, dtype=torch.float64)
        flow[0, :, 0, 0] = torch.tensor([0.0, 0.5])  # half a pixel outside a 1-row map
        warped, _ = backward_warp(image, flow)
        for y in range(size[0]):
            for x in range(size[1]):
                px, py = x + flow[0, 0, y, x].item(), y + flow[0, 1, y, x].item()
                torch.testing.assert_close(warped[0, :, y, x], naive_bilinear(image[0], px, py))

    def test_integer_shift_is_exact(self) -> None:
        image = torch.arange(60.0).view(1, 3, 4, 5)
        flow = torch.zeros(1, 2, 4, 5)
        flow[:, 0] = 2.0
        flow[:, 1] = -1.0
        warped, inside = backward_warp(image, flow)
        assert torch.equal(warped[0, :, 1:, :3], image[0, :, :3, 2:])
        assert inside[0, 1:, :3].all() and not inside[0, 0].any() and not inside[0, :, 3:].any()

    def test_gradcheck(self) -> None:
        g = torch.Generator().manual_seed(1)
        image = torch.rand(1, 2, 4, 5, generator=g, dtype=torch.float64, requires_grad=True)
        # keep sample positions away from pixel-grid kinks, where bilinear is not differentiable
        flow = (torch.rand(1, 2, 4, 5, generator=g, dtype=torch.float64) * 0.8 + 0.1)
        flow.requires_grad_(True)
        assert torch.autograd.gradcheck(lambda i, f: backward_warp(i, f)[0], (image, flow))

    @pytest.mark.parametrize(("image", "flow"), [
        (torch.zeros(3, 4, 5), torch.zeros(1, 2, 4, 5)),
        (torch.zeros(1, 3, 4, 5), torch.zeros(1, 3, 4, 5)),
        (torch.zeros(1, 3, 4, 5), torch.zeros(1, 2, 4, 6)),
    ])
    def test_bad_shapes(self, image: torch.Tensor, flow: torch.Tensor) -> None:
        with pytest.raises(ValueError, match="shape"):
            backward_warp(image, flow)

    def test_integer_dtype(self) -> None:
        with pytest.raises(TypeError, match="floating"):
            backward_warp(torch.zeros(1, 1, 2, 2, dtype=torch.uint8), torch.zeros(1, 2, 2, 2))


class TestWarpByDisparity:
    def test_left_reads_right_at_x_minus_d(self) -> None:
        g = torch.Generator().manual_seed(2)
        right = torch.rand(1, 3, 4, 9, generator=g)
        disparity = torch.rand(1, 4, 9, generator=g) * 3
        warped, inside = warp_by_disparity(right, disparity)
        for y in range(4):
            for x in range(9):
                ref = naive_bilinear(right[0], x - disparity[0, y, x].item(), y)
                torch.testing.assert_close(warped[0, :, y, x], ref)
        assert torch.equal(inside, torch.arange(9.0).view(1, 1, 9) - disparity >= 0)

    def test_right_reference_sign(self) -> None:
        flow = disparity_to_flow(torch.full((1, 2, 3), 1.5), reference="right")
        assert torch.equal(flow[:, 0], torch.full((1, 2, 3), 1.5))
        assert torch.equal(flow[:, 1], torch.zeros(1, 2, 3))

    def test_errors(self) -> None:
        with pytest.raises(ValueError, match="disparity"):
            warp_by_disparity(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2))
        with pytest.raises(ValueError, match="reference"):
            disparity_to_flow(torch.zeros(1, 2, 2), reference="up")
