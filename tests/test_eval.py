from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from crossview.eval import evaluate, numpy_sample
from crossview.metrics import d1, endpoint_error, flow_endpoint_error, get_metrics


def _stereo_dataset(count: int = 3) -> list[dict]:
    rng = np.random.default_rng(0)
    samples = []
    for i in range(count):
        size = (4 + i, 5)
        samples.append({
            "name": f"s{i}",
            "image0": rng.integers(0, 256, (*size, 3), dtype=np.uint8),
            "image1": rng.integers(0, 256, (*size, 3), dtype=np.uint8),
            "disparity": rng.uniform(1, 80, size).astype(np.float32),
            "valid": rng.random(size) < 0.8,
        })
    return samples


def _noisy(seed: int):
    rng = np.random.default_rng(seed)
    return lambda sample: sample["disparity"] + rng.normal(0, 4, sample["disparity"].shape)


def test_evaluate_matches_direct_metric_computation() -> None:
    dataset = _stereo_dataset()
    metrics = get_metrics("stereo", ["epe", "d1_all"])
    result = evaluate(dataset, _noisy(1), metrics, reduction="image_mean", dataset_name="toy")
    noisy = _noisy(1)  # the same noise stream again
    predictions = [noisy(sample) for sample in dataset]
    epe = [endpoint_error(p, s["disparity"], s["valid"]) for p, s in zip(predictions, dataset,
                                                                          strict=True)]
    outliers = [d1(p, s["disparity"], s["valid"]) for p, s in zip(predictions, dataset,
                                                                  strict=True)]
    assert [name for name, _ in result.rows] == ["s0", "s1", "s2"]
    for (_, values), e, o in zip(result.rows, epe, outliers, strict=True):
        assert values == {"epe": pytest.approx(e.value), "d1_all": pytest.approx(o.value)}
    assert result.mean()["epe"] == pytest.approx(np.mean([e.value for e in epe]))
    pooled = sum(e.total for e in epe) / sum(e.count for e in epe)
    assert result.summary["epe"]["pooled"] == pytest.approx(pooled)
    assert result.task == "stereo" and result.dataset == "toy"


def test_perfect_predictor_scores_zero_and_limit_and_callback() -> None:
    seen = []
    result = evaluate(_stereo_dataset(), lambda s: s["disparity"],
                      get_metrics("stereo", ["epe", "bad1"]), limit=2,
                      on_sample=lambda i, name, values: seen.append((i, name, values["epe"])))
    assert seen == [(0, "s0", 0.0), (1, "s1", 0.0)]
    assert result.mean() == {"epe": 0.0, "bad1": 0.0}


def test_torch_samples_and_predictions_are_converted() -> None:
    flow = torch.randn(2, 3, 4)
    sample = {"image0": torch.rand(3, 3, 4) * 255, "flow": flow, "valid": torch.ones(3, 4,
                                                                                     dtype=bool)}
    converted = numpy_sample(sample)
    assert converted["image0"].shape == (3, 4, 3) and converted["flow"].shape == (3, 4, 2)
    result = evaluate([sample], lambda s: torch.from_numpy(s["flow"]) + torch.tensor([3.0, 4.0]),
                      get_metrics("flow", ["epe"]))
    assert result.mean()["epe"] == pytest.approx(5.0)
    expected = flow_endpoint_error(converted["flow"] + [3, 4], converted["flow"]).value
    assert result.mean()["epe"] == pytest.approx(expected)


def test_json_dict_turns_nan_into_null() -> None:
    dataset = _stereo_dataset(1)
    dataset[0]["valid"][:] = False
    result = evaluate(dataset, lambda s: s["disparity"], get_metrics("stereo", ["epe"]))
    payload = json.loads(json.dumps(result.to_dict()))
    assert math.isnan(result.mean()["epe"])
    assert payload["mean"] == {"epe": None}
    assert payload["per_sample"] == [{"name": "s0", "epe": None}]


@pytest.mark.parametrize("limit", [0, None])
def test_no_sample_scored_gives_nan_means_not_a_key_error(limit: int | None) -> None:
    dataset = _stereo_dataset(2) if limit == 0 else []
    result = evaluate(dataset, lambda s: s["disparity"], get_metrics("stereo", ["epe", "bad1"]),
                      limit=limit)
    assert result.rows == [] and all(math.isnan(v) for v in result.mean().values())
    assert result.to_dict()["mean"] == {"epe": None, "bad1": None}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="several tasks"):
        evaluate([], lambda s: 0, get_metrics("stereo", ["epe"]) + get_metrics("flow", ["epe"]))
    with pytest.raises(ValueError, match="reduction"):
        evaluate([], lambda s: 0, [], reduction="median")
    with pytest.raises(ValueError, match=r"prediction\.shape"):
        evaluate(_stereo_dataset(1), lambda s: s["disparity"][:2], get_metrics("stereo", ["epe"]))


def test_categories_are_summarised_in_order_of_appearance() -> None:
    dataset = _stereo_dataset(5)
    for i, (sample, category) in enumerate(zip(dataset, "babab", strict=True)):
        sample["category"], sample["offset"] = category, float(i + 1)
    metrics = get_metrics("stereo", ["epe"])
    # every valid pixel of sample i is off by i + 1 px
    result = evaluate(dataset, lambda s: s["disparity"] + s["offset"], metrics,
                      reduction="image_mean")
    assert list(result.categories) == ["b", "a"]
    for category, members in (("b", (0, 2, 4)), ("a", (1, 3))):
        pixels = [int(dataset[i]["valid"].sum()) for i in members]
        pooled = sum((i + 1) * n for i, n in zip(members, pixels, strict=True)) / sum(pixels)
        assert result.categories[category]["epe"] == {
            "pooled": pytest.approx(pooled),
            "image_mean": pytest.approx(np.mean([i + 1 for i in members]))}
        assert result.category_mean(category) == {"epe": pytest.approx(
            np.mean([i + 1 for i in members]))}
    assert json.loads(json.dumps(result.to_dict()))["categories"]["b"]["epe"]["image_mean"] == (
        pytest.approx(3.0))
    # a sample without a category: no category summaries at all
    del dataset[0]["category"]
    assert evaluate(dataset, lambda s: s["disparity"], metrics).categories == {}
