"""Pictures: the standard flow wheel's known colours, colour bars, masks, self-rpos arrows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.viz import (
    KEY_MARGIN,
    KEY_MIN_RADIUS,
    colour_wheel,
    disparity_to_colour,
    flow_colour_key,
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


def test_flow_colour_key_gives_each_direction_its_colour_in_the_picture() -> None:
    radius, max_flow = 20, 5.0
    key = flow_colour_key(max_flow, radius)
    centre = KEY_MARGIN + radius
    assert tuple(key[centre, centre]) == (255, 255, 255)  # no motion: white
    assert tuple(key[centre, centre + radius]) == (255, 0, 0)  # rightwards, full: red
    # right, down, left, up (image y is down) and a diagonal, from the centre to the rim
    for dx, dy in ((1, 0), (0, 1), (-1, 0), (0, -1), (1, -1)):
        for step in range(1, int(radius / np.hypot(dx, dy)) + 1):
            flow = np.array([[[dx, dy]]]) * step * max_flow / radius
            assert tuple(key[centre + step * dy, centre + step * dx]) == tuple(
                flow_to_colour(flow, max_flow=max_flow)[0, 0]), (dx, dy, step)
    assert tuple(key[KEY_MARGIN, KEY_MARGIN]) == (255, 255, 255)  # outside the disc
    disc, label = slice(0, centre + radius + 1), slice(centre + radius + 1, None)
    assert key[label].min() < 128  # the maximum magnitude is written below the wheel
    other = flow_colour_key(50.0, radius)  # a longer label: a wider key
    np.testing.assert_array_equal(other[disc, disc], key[disc, disc])
    assert not np.array_equal(other[label, disc], key[label, disc])
    with pytest.raises(ValueError, match="max_flow"):
        flow_colour_key(0.0, radius)


def test_flow_picture_with_its_key_keeps_the_flow_pixels() -> None:
    flow = torch.randn(2, 40, 30) * 3
    picture = flow_to_colour(flow, key=True)
    largest = float(np.hypot(*flow.double().numpy()).max())
    key = flow_colour_key(largest, KEY_MIN_RADIUS)  # an eighth of 40 rows is below the least
    assert picture.shape == (max(40, key.shape[0]), 30 + key.shape[1], 3)
    np.testing.assert_array_equal(picture[:40, :30], flow_to_colour(flow))
    assert (picture[40:, :30] == 255).all()  # below the flow, beside the taller key: white
    np.testing.assert_array_equal(picture[:key.shape[0], 30:], key)


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
