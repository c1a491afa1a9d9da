"""One rank of a distributed :func:`crossview.eval.evaluate` run on a toy stereo set.

The test launches it once per rank with torchrun's environment variables set
(``python eval_dist_worker.py OUT_DIR [BROKEN_INDEX]``); each rank writes ``rankR.json`` with the
indices it scored and the result it got. The toy set and predictor are importable so that the
test computes the one-process reference in-process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from crossview.distributed import close_distributed, init_distributed
from crossview.errors import UserError
from crossview.eval import evaluate
from crossview.metrics import get_metrics

METRICS = ("epe", "bad1", "d1_all")


def toy_stereo(count: int) -> list[dict]:
    """Samples of different sizes (pooled != image mean); sample 2 has no valid pixel; samples
    1 and 4 are of category "b", the others of "a" (gathered across ranks with the scores)."""
    rng = np.random.default_rng(0)
    samples = []
    for i in range(count):
        size = (3 + i % 3, 4 + i)
        valid = rng.random(size) < 0.8
        if i == 2:
            valid[:] = False
        samples.append({"name": f"s{i}", "disparity": rng.uniform(1, 60, size), "valid": valid,
                        "category": "ab"[i % 3 == 1]})
    return samples


def noisy_predictor(broken: int | None = None):
    """Ground truth plus noise seeded by the sample's index; sample ``broken`` raises."""

    def predict(sample: dict) -> np.ndarray:
        index = int(sample["name"][1:])
        if index == broken:
            raise ValueError(f"broken sample {index}")
        rng = np.random.default_rng(index)
        return sample["disparity"] + rng.normal(0, 3, sample["disparity"].shape)

    return predict


def main(out_dir: str, broken: int | None) -> None:
    info = init_distributed("cpu")
    seen: list[int] = []
    try:
        result = evaluate(toy_stereo(7), noisy_predictor(broken), get_metrics("stereo", METRICS),
                          dataset_name="toy", on_sample=lambda i, *_: seen.append(i),
                          dist_info=info)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    finally:
        close_distributed(info)
    payload = {"seen": seen, "result": result.to_dict()}
    (Path(out_dir) / f"rank{info.rank}.json").write_text(json.dumps(payload))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
