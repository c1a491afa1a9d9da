from __future__ import annotations

from crossview.data.synthetic.camera_scenes import BASE_FOCAL, make_scenes


def test_scenes_have_per_view_zoom_in_range() -> None:
    data = make_scenes(2, 3, (1.0, 3.0), seed=0, size=(16, 16), test_zoom=(3.0, 5.0))
    assert data["images"].shape == (2, 3, 3, 16, 16)
    assert data["viewmats"].shape == (2, 3, 4, 4)
    zoom = data["K"][..., 0, 0] / (BASE_FOCAL * 16)
    zoomed = data["K_zoomed"][..., 0, 0] / (BASE_FOCAL * 16)
    assert float(zoom.min()) >= 1.0 - 1e-5 and float(zoom.max()) <= 3.0 + 1e-5
    assert float(zoomed.min()) >= 3.0 - 1e-5 and float(zoomed.max()) <= 5.0 + 1e-5
    # principal points near the image centre, in crossview's +0.5 pixel-centre convention
    assert float((data["K"][..., :2, 2] - 8.0).abs().max()) < 0.05 * 16 + 1e-5
