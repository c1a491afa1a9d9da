from __future__ import annotations

import numpy as np

from crossview.data.synthetic.textures import fade_rows, sky_texture


def test_fade_rows_keeps_sharp_rows_and_smooths_far_ones() -> None:
    texture = np.random.default_rng(0).uniform(0.0, 255.0, (64, 48, 3)).astype(np.float32)
    out = fade_rows(texture, np.linspace(0.5, 16.0, 64))
    assert out.shape == texture.shape and out.dtype == np.float32
    np.testing.assert_array_equal(out[0], texture[0])  # a footprint below 1 texel: unchanged
    # detail (row-to-row change) shrinks with the footprint; the mean colour stays
    detail = np.abs(np.diff(out, axis=1)).mean(axis=(1, 2))
    assert detail[-8:].mean() < 0.2 * detail[:4].mean()
    np.testing.assert_allclose(out[-8:].mean(), texture.mean(), rtol=0.05)


def test_sky_is_nearly_textureless() -> None:
    for seed in range(4):
        sky = sky_texture(np.random.default_rng(seed), (64, 64))
        assert sky.shape == (64, 64, 3) and sky.min() >= 0.0 and sky.max() <= 255.0
        assert np.abs(np.diff(sky, axis=1)).max() < 2.0  # no edges along a row
