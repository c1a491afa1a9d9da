"""The api: padding and cropping, both views, masks, LRI, FRI, precisions, batches, errors."""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

import crossview
from crossview import api
from crossview.errors import UserError
from crossview.geometry.consistency import consistency_error, noc_mask
from crossview.models.dense import inference
from crossview.models.matchstereo import MatchStereo
from crossview.models.transformatcher.inference import transfer_keypoints
from small_networks import SMALL


@pytest.fixture(scope="module")
def model() -> MatchStereo:
    torch.manual_seed(0)
    return MatchStereo(SMALL).eval()


@pytest.fixture(scope="module")
def flow_model() -> MatchStereo:
    torch.manual_seed(0)
    return MatchStereo(SMALL, task="flow").eval()


def _pair(h: int = 200, w: int = 230, b: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    left = torch.rand(b, 3, h, w) * 255
    return left, torch.roll(left, -4, dims=3)


def test_pad_top_right_by_replication_and_crop() -> None:
    x = torch.arange(2 * 3 * 5 * 7, dtype=torch.float32).view(2, 3, 5, 7)
    padded = inference._pad(x)
    assert padded.shape == (2, 3, 32, 32)
    torch.testing.assert_close(padded[..., 27:, :7], x)            # image at the bottom left
    torch.testing.assert_close(padded[..., 0, :7], x[..., 0, :])   # top rows repeat row 0
    torch.testing.assert_close(padded[..., 27:, 31], x[..., :, 6])  # right columns repeat
    field = padded.permute(0, 2, 3, 1)[..., :2]
    torch.testing.assert_close(inference._crop(field, 5, 7), x.permute(0, 2, 3, 1)[..., :2])


def test_disparity_equals_the_padded_model_run(model: MatchStereo) -> None:
    left, right = _pair()
    result = api.estimate_disparity(left, right, model=model)
    with torch.no_grad():
        out = model.forward_fields(inference._pad(left), inference._pad(right))
    field = inference._crop(out["field"], 200, 230)
    torch.testing.assert_close(result.disparity, (-field[:1, ..., 0]).clamp(min=0))
    torch.testing.assert_close(result.disparity_right, field[1:, ..., 0].clamp(min=0))
    torch.testing.assert_close(result.valid, noc_mask(field, 8.0)[:1])
    assert result.valid.dtype == torch.bool and result.self_rpos.shape == (1, 200, 230, 2)
    # confidence: exp(-left-right error) * (1 - peak of the last cross-attention, upsampled)
    attn = out["cross_attn"]  # [2, H/4, W/4, heads, K], rows summing to 1
    keys = attn.shape[-1]
    torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:-1]))
    peak = ((attn.max(-1).values - 1 / keys) / (1 - 1 / keys)).mean(-1)
    peak = torch.nn.functional.interpolate(peak[:, None], size=(224, 256), mode="bilinear",
                                           align_corners=True)[:, 0]
    peak = peak[:, 224 - 200:, :230]  # the padding went on top and right
    error = consistency_error(field)[0]
    torch.testing.assert_close(result.confidence, (torch.exp(-error) * (1 - peak))[:1])
    torch.testing.assert_close(result.confidence_right, (torch.exp(-error) * (1 - peak))[1:])


def test_flow_layout(flow_model: MatchStereo) -> None:
    result = crossview.estimate_flow(*_pair(), model=flow_model)
    assert result.flow.shape == result.flow_backward.shape == (1, 2, 200, 230)
    assert result.valid_backward.shape == (1, 200, 230)


def test_batch_equals_single_runs(model: MatchStereo) -> None:
    left, right = _pair(b=2)
    both = api.estimate_disparity(left, right, model=model)
    for i in range(2):
        one = api.estimate_disparity(left[i:i + 1], right[i:i + 1], model=model)
        torch.testing.assert_close(both.disparity[i:i + 1], one.disparity, atol=1e-4, rtol=1e-4)


def test_image_forms_agree(model: MatchStereo, tmp_path: Path) -> None:
    left, right = (x[0].permute(1, 2, 0).round().to(torch.uint8).numpy() for x in _pair())
    Image.fromarray(left).save(tmp_path / "l.png")
    from_tensor = api.estimate_disparity(*(torch.from_numpy(a).permute(2, 0, 1)[None].float()
                                           for a in (left, right)), model=model)
    for first in (str(tmp_path / "l.png"), Image.fromarray(left), left):
        result = api.estimate_disparity(first, right, model=model)
        torch.testing.assert_close(result.disparity, from_tensor.disparity)


def test_fixed_resolution_at_own_size_is_identity(model: MatchStereo) -> None:
    left, right = _pair(192, 224)
    plain = api.estimate_disparity(left, right, model=model)
    fixed = api.estimate_disparity(left, right, model=model, size=(192, 224))
    torch.testing.assert_close(fixed.disparity, plain.disparity)


def test_fixed_resolution_rescales(flow_model: MatchStereo, monkeypatch) -> None:
    field = torch.ones(2, 192, 256, 2)
    peak = torch.full((2, 192, 256), 0.75)
    monkeypatch.setattr(inference, "run_padded", lambda *args: (field, field, peak))
    result = api.estimate_flow(*_pair(384, 384), model=flow_model, size=(192, 256))
    assert result.flow.shape == (1, 2, 384, 384)
    torch.testing.assert_close(result.flow[:, 0], torch.full((1, 384, 384), 1.5))
    torch.testing.assert_close(result.flow[:, 1], torch.full((1, 384, 384), 2.0))
    # both frames move by (1.5, 2): forward-backward error 7 px where the match stays inside
    # (3.5 px outside, between at the border), times 1 - peak resized back (0.25)
    assert result.confidence.shape == (1, 384, 384)
    assert result.confidence.median().item() == pytest.approx(0.25 * math.exp(-7.0))
    assert result.confidence.max().item() == pytest.approx(0.25 * math.exp(-3.5))


def test_lri_feeds_the_half_resolution_field(model: MatchStereo, monkeypatch) -> None:
    calls = []
    original = model.forward_fields

    def spy(img0, img1, task="stereo", init_field=None):
        out = original(img0, img1, task=task, init_field=init_field)
        calls.append((tuple(img0.shape), init_field, out))
        return out

    monkeypatch.setattr(model, "forward_fields", spy)
    api.estimate_disparity(*_pair(400, 420), model=model, lri=True)
    (half_shape, half_init, half_out), (full_shape, init, _) = calls
    assert half_shape == (1, 3, 224, 224) and half_init is None  # 200x210, padded
    assert full_shape == (1, 3, 416, 448)
    coarse = inference._crop(half_out["field"], 200, 210)
    expected = inference._resize_field(coarse, (13, 14)) * (2 / 32)
    torch.testing.assert_close(init, expected)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precisions_run_and_stay_float32(model: MatchStereo, precision: str) -> None:
    result = api.estimate_disparity(*_pair(192, 192), model=model, precision=precision)
    assert result.disparity.dtype == torch.float32
    assert torch.isfinite(result.disparity).all()


def test_load_model_weights_and_random_warning(tmp_path: Path) -> None:
    with pytest.warns(api.RandomWeightsWarning, match="meaningless"):
        crossview.load_model("multiview", depth=1)  # a model with no weights, bundled or published
    random = api.build_model("matchstereo-t")
    assert random.weights_source is None
    state = {k: torch.randn_like(v) for k, v in random.state_dict().items()}
    save_file(state, tmp_path / "t.safetensors")
    torch.save({"model": state}, tmp_path / "t.pth")
    for name in ("t.safetensors", "t.pth"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loaded = crossview.load_model("matchstereo-t", weights=tmp_path / name)
        assert torch.equal(loaded.state_dict()["up_masks.4.2.weight"], state["up_masks.4.2.weight"])
    with pytest.raises(UserError, match=r"shape mismatches \(615\)"):
        crossview.load_model("matchstereo-s", weights=tmp_path / "t.pth")
    assert {"matchstereo-t", "matchstereo-s", "matchstereo-b", "matchflow-b"} <= set(
        crossview.list_models())


def test_the_top_level_names_are_listed_and_are_the_api() -> None:
    assert {"load_model", "build_model", "list_models", "estimate_disparity", "estimate_flow",
            "match_keypoints", "disparity_to_depth", "depth_to_points"} <= set(crossview.__all__)
    assert set(crossview.__all__) <= set(dir(crossview))
    assert crossview.build_model is api.build_model
    assert crossview.build_model("matchstereo-mini").weights_source is None


def _nan(x: torch.Tensor) -> torch.Tensor:
    return x.index_fill(3, torch.tensor([5]), float("nan"))


# (case, call(model, flow_model, left, right), exception, message): every bad argument is one
# error naming it in user terms
BAD_CALLS = [
    ("size mismatch", lambda m, f, a, b: api.estimate_disparity(a, b[..., :200], model=m),
     UserError, r"differ in size: \(200, 230\) and \(200, 200\)"),
    ("batch mismatch", lambda m, f, a, b: api.estimate_disparity(torch.cat([a, a]), b, model=m),
     UserError, "differ in batch size: the first holds 2 images, the second 1"),
    ("too small", lambda m, f, a, b: api.estimate_disparity(a[..., :150, :], b[..., :150, :],
                                                            model=m), UserError,
     "images of 150x230 px are too small: the model needs at least 161x161 px"),
    ("precision", lambda m, f, a, b: api.estimate_disparity(a, b, model=m, precision="int8"),
     UserError, "precision"),
    ("unknown model", lambda m, f, a, b: api.estimate_disparity(a, b, model="matchstereo-xl"),
     UserError, "unknown model"),
    ("float numpy", lambda m, f, a, b: api.estimate_disparity(
        np.zeros((200, 230, 3), np.float32), b, model=m), TypeError, "uint8"),
    ("NaN first image", lambda m, f, a, b: api.estimate_disparity(_nan(a), b, model=m),
     ValueError, "^first image holds NaN values$"),
    ("infinite second image", lambda m, f, a, b: api.estimate_flow(a, b / 0, model=f),
     ValueError, "^second image holds infinite values$"),
    ("NaN second frame", lambda m, f, a, b: api.estimate_flow(a, _nan(b), model=f),
     ValueError, "^second image holds NaN values$"),
    ("empty batch", lambda m, f, a, b: api.estimate_disparity(a[:0], b[:0], model=m),
     ValueError, r"first image is empty: shape \[0, 3, 200, 230\]"),
    ("empty image", lambda m, f, a, b: api.estimate_disparity(a, b[..., :0], model=m),
     ValueError, r"second image is empty: shape \[1, 3, 200, 0\]"),
    ("size zero", lambda m, f, a, b: api.estimate_disparity(a, b, model=m, size=(0, 0)),
     ValueError, r"size must be positive \(H, W\), got \(0, 0\)"),
    ("size not ints", lambda m, f, a, b: api.estimate_disparity(a, b, model=m, size=(1.5, 2)),
     TypeError, r"size must be \(H, W\), two ints, got \(1.5, 2\)"),
    ("size too small", lambda m, f, a, b: api.estimate_flow(a, b, model=f, size=(64, 64)),
     UserError, r"size=\(64, 64\) is too small: the model needs at least"),
    ("huge size", lambda m, f, a, b: api.estimate_disparity(a, b, model=m,
                                                            size=(100000, 100000)),
     UserError, "at 100000x100000 px .* needs about .* TiB of memory"),
    ("flow model for disparity", lambda m, f, a, b: api.estimate_disparity(a, b, model=f),
     UserError, "estimates flow; estimate_disparity needs a stereo model"),
    ("stereo model for flow", lambda m, f, a, b: api.estimate_flow(a, b, model=m),
     UserError, "estimates stereo; estimate_flow needs a flow model"),
    ("flow name for disparity", lambda m, f, a, b: api.estimate_disparity(
        a, b, model="matchflow-mini"), UserError,
     "'matchflow-mini' estimates flow; estimate_disparity needs a stereo model"),
    ("device foo", lambda m, f, a, b: api.estimate_disparity(a, b, model=m, device="foo"),
     UserError, "device 'foo' is not a device name; available here: cpu"),
    ("device meta", lambda m, f, a, b: api.estimate_flow(a, b, model=f, device="meta"),
     UserError, "device 'meta': device type 'meta' holds no data"),
    ("no model name", lambda m, f, a, b: crossview.load_model(None), TypeError,
     "^the model name must be a string, got None; choose one of: .*matchstereo-t"),
    ("points NaN", lambda m, f, a, b: api.match_keypoints(a, b, [[1.0, float("nan")]]),
     UserError, r"point \(1, nan\) is not finite"),
]
NO_CUDA = [("device cuda", lambda m, f, a, b: api.estimate_disparity(a, b, model=m,
                                                                      device="cuda:1"),
            UserError, "device 'cuda:1': CUDA is not available on this machine"),
           ("load_model cuda", lambda m, f, a, b: crossview.load_model(device="cuda"),
            UserError, "device 'cuda': CUDA is not available")]
NO_MPS = [("device mps", lambda m, f, a, b: api.estimate_disparity(a, b, model=m, device="mps"),
           UserError, "device 'mps': MPS .* is not available on this machine"),
          ("load_model mps", lambda m, f, a, b: crossview.load_model("matchstereo-mini",
                                                                     device="mps"),
           UserError, "device 'mps': MPS")]


@pytest.mark.parametrize(("case", "call", "error", "message"), [
    *BAD_CALLS,
    *(pytest.param(*case, marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA"))
      for case in NO_CUDA),
    *(pytest.param(*case, marks=pytest.mark.skipif(torch.backends.mps.is_available(),
                                                   reason="MPS")) for case in NO_MPS)])
def test_bad_arguments_are_one_error_naming_them(model: MatchStereo, flow_model: MatchStereo,
                                                 monkeypatch, case, call, error,
                                                 message) -> None:
    monkeypatch.setenv("CROSSVIEW_MAX_MEMORY_GB", "16")  # the same limit on every machine
    left, right = _pair()
    with pytest.raises(error, match=message) as raised:
        call(model, flow_model, left, right)
    assert type(raised.value) is error and "\n" not in str(raised.value)


@pytest.mark.parametrize(("lri", "size", "extra"), [
    (False, None, lambda m: 0),
    (True, None, lambda m: m.inference_bytes(1, 320, 320, "stereo")),  # + the half pass
    (False, (256, 288), lambda m: inference.RESIZE_BYTES_PER_PIXEL * 630 * 620
     - m.inference_bytes(1, 640, 640, "stereo") + m.inference_bytes(1, 256, 288, "stereo")),
])
def test_check_memory_returns_the_estimate_it_checked(model: MatchStereo, lri: bool, size,
                                                      extra) -> None:
    needed = api.check_memory(model, 630, 620, task="stereo", lri=lri, size=size)
    assert needed == model.inference_bytes(1, 640, 640, "stereo") + extra(model)


def test_check_memory_counts_the_refinement_at_full_resolution(model: MatchStereo) -> None:
    """Fixed-resolution inference on a big pair: the network runs small, the refinement at
    the input size dominates (and the model's default decides when ``refine`` is None)."""
    refined = inference.REFINE_BYTES_PER_PIXEL * 2 * 3000 * 3000
    resize = inference.RESIZE_BYTES_PER_PIXEL * 3000 * 3000
    assert api.check_memory(model, 3000, 3000, task="stereo", size=(256, 256),
                            refine=True) == refined + resize
    plain = model.inference_bytes(1, 256, 256, "stereo") + resize
    assert api.check_memory(model, 3000, 3000, task="stereo", size=(256, 256)) == plain
    model.refine_by_default = True
    try:
        assert api.check_memory(model, 3000, 3000, task="stereo", size=(256, 256)) == (
            refined + resize)
    finally:
        del model.refine_by_default


def test_models_without_an_estimate_are_not_checked(monkeypatch) -> None:
    monkeypatch.setenv("CROSSVIEW_MAX_MEMORY_GB", "0.001")
    assert api.check_memory(torch.nn.Identity(), 100000, 100000, task="stereo") is None


def test_without_attention_weights_the_confidence_is_the_consistency_alone() -> None:
    torch.manual_seed(0)
    plain = MatchStereo(dataclasses.replace(SMALL, attn_to_proj=False)).eval()
    left, right = _pair(192, 224)
    fields = inference.predict_fields(plain, left, right, "stereo")
    assert fields.attention_peak is None
    result = api.estimate_disparity(left, right, model=plain)
    expected = torch.exp(-consistency_error(fields.field)[0])
    torch.testing.assert_close(result.confidence, expected[:1])


def test_predictor_variants_run_the_same_network_without_its_refinement() -> None:
    assert list(api.predictor_variants("transformatcher")) == ["raw"]
    assert api.predictor_variants("matchstereo-mini") == {}
    torch.manual_seed(0)
    model = api.build_model("transformatcher", grid=4)
    rng = np.random.default_rng(0)
    sample = {"image0": rng.integers(0, 256, (30, 40, 3), dtype=np.uint8),
              "image1": rng.integers(0, 256, (36, 30, 3), dtype=np.uint8),
              "keypoints0": rng.uniform(0, 29, (5, 2)).astype(np.float32)}
    raw = api.predictor(model, variant="raw")(sample)
    src, tgt = (torch.from_numpy(sample[k]).permute(2, 0, 1)[None].float()
                for k in ("image0", "image1"))
    with torch.no_grad():
        expected = transfer_keypoints(model, src, tgt, torch.from_numpy(sample["keypoints0"]),
                                      "raw")
    np.testing.assert_allclose(raw, expected.numpy(), atol=1e-5)
    with pytest.raises(UserError, match="model 'transformatcher' has no predictor variant "
                                        "'refined'; variants: raw"):
        api.predictor(model, variant="refined")


def test_a_model_named_is_loaded_once_for_calls_in_a_row(tmp_path: Path, monkeypatch) -> None:
    loads: list[str] = []

    def counted(spec, path, **kwargs):
        loads.append(Path(path).name)
        return load(spec, path, **kwargs)

    load = api._load
    monkeypatch.setattr(api, "_load", counted)
    monkeypatch.setattr(api, "_kept_models", type(api._kept_models)())
    state = api.build_model("matchstereo-t").state_dict()
    files = []
    for seed in range(3):
        torch.manual_seed(seed)
        files.append(tmp_path / f"w{seed}.safetensors")
        save_file({k: torch.randn_like(v) * 0.02 for k, v in state.items()}, files[-1])
    left, right = _pair(176, 192)

    def run(path: Path) -> torch.Tensor:
        return crossview.estimate_disparity(left, right, model="matchstereo-t",
                                            weights=path).disparity

    first = run(files[0])
    assert torch.equal(run(files[0]), first) and loads == ["w0.safetensors"]
    assert not torch.equal(run(files[1]), first)
    assert loads == ["w0.safetensors", "w1.safetensors"]
    run(files[2])  # three files: the oldest is dropped (KEPT_MODELS = 2)
    run(files[0])
    assert loads == ["w0.safetensors", "w1.safetensors", "w2.safetensors", "w0.safetensors"]
    # the file written again (a new training run exported to the same path) is read again
    torch.manual_seed(7)
    save_file({k: torch.randn_like(v) * 0.02 for k, v in state.items()}, files[0])
    stat = files[0].stat()
    os.utime(files[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert not torch.equal(run(files[0]), first)
    assert loads[-1] == "w0.safetensors" and len(loads) == 5
