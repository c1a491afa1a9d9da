"""Pictures: the standard flow wheel's known colours, colour bars, masks, self-rpos arrows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.viz import (
    colour_wheel,
    disparity_to_colour,
    flow_to_colour,
    mask_to_image,
    self_rpos_picture,
)


def test_wheel_segments_follow_middlebury() -> None:
    wheel = colour_wheel()
    assert wheel.shape == (55, 3)
    # segment starts: red, yellow, green, cyan, blue, magenta
    for index, colour in ((0, (255, 0, 0)), (15, (255, 255, 0)), (21, (0, 255, 0)),
                          (25, (0, 255, 255)), (36, (0, 0, 255)), (49, (255, 0, 255))):
        assert tuple(wheel[index]) == colour
    assert tuple(wheel[1]) == (255, np.floor(255 / 15), 0)


def test_flow_colours() -> None:
    flow = np.zeros((1, 4, 2))
    flow[0, 1] = (1.0, 0.0)   # right
    flow[0, 2] = (-1.0, 0.0)  # left
    flow[0, 3] = (0.5, 0.0)   # right, half magnitude
    colours = flow_to_colour(flow)
    assert tuple(colours[0, 0]) == (255, 255, 255)  # zero flow is white
    assert tuple(colours[0, 1]) == (255, 0, 0)        # right is red (wheel start)
    assert tuple(colours[0, 2]) == (0, 209, 255)      # left is cyan-blue (wheel entry 27)
    assert tuple(colours[0, 3]) == (255, 127, 127)    # half saturation towards white


def test_flow_layouts_agree_and_overflow_darkens() -> None:
    flow = torch.randn(2, 5, 6)
    np.testing.assert_array_equal(flow_to_colour(flow), flow_to_colour(flow.permute(1, 2, 0)))
    far = flow_to_colour(np.array([[[2.0, 0.0]]]), max_flow=1.0)
    assert tuple(far[0, 0]) == (191, 0, 0)
    with pytest.raises(ValueError, match="flow"):
        flow_to_colour(np.zeros((3, 4, 5)))
    for bad in (0.0, -1.0, float("nan")):  # 0 divided the flow into NaN: a garbage picture
        with pytest.raises(ValueError, match="max_flow"):
            flow_to_colour(np.ones((2, 2, 2)), max_flow=bad)


def test_disparity_colour_bar() -> None:
    disp = np.tile(np.linspace(0, 50, 40), (30, 1))
    plain = disparity_to_colour(disp, colour_bar=False)
    barred = disparity_to_colour(disp, vmin=0, vmax=50)
    assert plain.shape == (30, 40, 3) and barred.shape[0] == 30 and barred.shape[1] > 40
    np.testing.assert_array_equal(barred[:, :40], disparity_to_colour(disp, vmin=0, vmax=50,
                                                                      colour_bar=False))
    # the bar runs from the top (vmax colour) to the bottom (vmin colour)
    assert tuple(barred[0, 42]) == tuple(barred[0, :40][disp[0] == 50][0])
    assert tuple(barred[-1, 42]) == tuple(plain[0, 0])


def test_mask_and_rpos_picture() -> None:
    mask = torch.tensor([[True, False]])
    np.testing.assert_array_equal(mask_to_image(mask), [[255, 0]])
    rpos = np.zeros((48, 48, 2))
    rpos[..., 0] = 10.0
    picture = self_rpos_picture(rpos, np.full((48, 48, 3), 128, np.uint8))
    assert picture.shape == (48, 48, 3)
    # an arrow from (12, 12) to (22, 12) is drawn in black
    assert (picture[12, 13:22] == 0).all()
    with pytest.raises(ValueError, match="self_rpos"):
        self_rpos_picture(np.zeros((4, 4)))
