"""MatchStereo speed and memory (stereo and flow models): latency, peak RSS and the
fused-vs-reference ratio in one run.

Every configuration (model, size, precision, MatchAttention backend) runs in its own child
process (``python -m crossview.bench.model CASE_JSON``), so the peak resident set size is that
configuration's alone and an out-of-memory case cannot take the others down. A case times
``crossview.estimate_disparity`` (a stereo model) or ``crossview.estimate_flow`` (a flow model)
with the model's defaults (padding, both views, lri, the refinement, the SGBM or DIS fusion and
the consistency mask included) on one random pair whose second image is the first shifted by
:data:`SHIFT_FRACTION` of the width (155 px at 1242 px wide, a near range of a driving scene),
or on a real pair given as two image files (a rectified pair, or two frames for flow), resized
to each size (``pair``): what a fusion costs depends on the pair (SGBM's search range, the
depth edges the median filters), so a real photograph times what users get. Models that ship
weights run with them: the SGBM fusion's search range follows the network's disparities, which
random weights would make arbitrary (up to the width); the other steps cost the same with any
weights, and the rest run randomly initialised.
Wall-clock and process CPU time are both reported; on a shared, busy machine the wall clock is
inflated by other processes, and CPU time / threads estimates what free cores would deliver.
With ``device="cuda"`` the model and images are on the GPU, the fused operator is the
``triton`` backend, every timed call waits for the GPU and the peak GPU memory
(``torch.cuda.max_memory_allocated``) is reported beside the RSS. A fusing model also runs
with each speed preset asked (:mod:`crossview.models.dense.presets`), and the classical
matchers users compare with (:data:`CLASSICAL`: OpenCV SGBM with its holes filled, OpenCV DIS)
are timed on the same pair in the same run, so that every time is also a ratio to theirs
(``vs_sgbm``, ``vs_dis``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from crossview.api import build_model, estimate_disparity, estimate_flow, load_model
from crossview.attention import set_backend
from crossview.bench.device import FUSED, synchronized
from crossview.bench.measure import peak_rss_bytes, time_call
from crossview.data.io import read_image
from crossview.models.dense.classical import dis_flow, fill_holes, sgbm_disparity
from crossview.models.dense.inference import fuses, network_settings, working_size
from crossview.models.registry import ModelSpec, get_spec

MODELS = {"T": "matchstereo-t", "S": "matchstereo-s", "B": "matchstereo-b"}  # other registered
# stereo and flow model names are benchmarked under their own name
# what a benchmarked model may estimate, and the call that times it
ESTIMATE = {"stereo": estimate_disparity, "flow": estimate_flow}
SIZES = ((384, 1248), (1536, 1536))
BIG = ((2176, 3840), "T")  # 4K: MatchStereo-T only on CPU, every model on a GPU
PRECISIONS = ("fp32", "bf16", "fp16")
DEFAULT_PRECISIONS = {"cpu": ("fp32", "bf16"), "cuda": ("fp16", "bf16")}
SHIFT_FRACTION = 1 / 8  # the benchmark pair's disparity, as a fraction of its width
# the classical matchers timed beside the models, on the pair as uint8 [H, W, 3] images: SGBM
# as the development tables run it (3-way, 128 disparities; holes filled along the rows), DIS
# (OpenCV's medium preset, both directions' one: the flow default fuses with it)
CLASSICAL = {"SGBM filled": lambda left, right: fill_holes(sgbm_disparity(left, right, 128)),
             "DIS": dis_flow}


def default_cases(models: Sequence[str], sizes: Sequence[tuple[int, int]],
                  precisions: Sequence[str], *, big: bool,
                  reference_sizes: Sequence[tuple[int, int]], repeats: int, threads: int,
                  reference_models: Sequence[str] = ("T",),
                  device: str = "cpu", presets: Sequence[str] = (),
                  classical: bool = False, alone: bool = False,
                  pair: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The configurations to run on ``device``: the fused operator (:data:`FUSED`) everywhere,
    the reference operator for ``reference_models`` at ``reference_sizes``. A model whose
    inference refines photometrically by default (:func:`refines_by_default`) also runs without
    the refinement (``"refine": False``), so that one run shows what the polish costs; a model
    that fuses also runs with each of ``presets`` and, with ``alone``, without the fusion
    (``"answer"``: ``"no-fuse"``, the network alone; for stereo ``"self-fuse"``, the network's
    views fused with each other, :data:`ANSWERS`). With ``classical``, each size's pair is also
    matched by each of :data:`CLASSICAL` (first, on the CPU). Every case runs on ``pair`` (two
    image files) if given, else on the random pair (:func:`bench_pair`). Cases above 1 Mpx run
    once, without warm-up."""
    cases = []
    if classical:
        cases += [{"model": name, "size": list(size), "precision": "-", "backend": "opencv",
                   "device": "cpu", "threads": threads, "repeats": repeats, "warmup": 1,
                   "classical": name} for size in sizes for name in CLASSICAL]
    shapes = [(m, s) for m in models for s in sizes]
    if big:
        shapes += [(m, BIG[0]) for m in models if m == BIG[1] or device == "cuda"]
    for model, size in shapes:
        for precision in precisions:
            heavy = size[0] * size[1] > 1_000_000
            reference = model in reference_models and tuple(size) in map(tuple, reference_sizes)
            spec = get_spec(MODELS.get(model, model))
            refine_modes = [None, False] if refines_by_default(spec) else [None]
            fusing = spec.fuse and spec.fused_network is not None
            runs = [{"refine": refine} for refine in refine_modes] + [
                {"refine": None, "preset": preset} for preset in presets if fusing] + [
                {"refine": None, "answer": answer} for answer, (task, _) in ANSWERS.items()
                if alone and fusing and task in (None, spec.task)]
            for backend in [FUSED[device]] + (["reference"] if reference else []):
                for run in runs:
                    cases.append({"model": model, "size": list(size), "precision": precision,
                                  "backend": backend, "device": device, "threads": threads,
                                  "repeats": 1 if heavy else repeats,
                                  "warmup": 0 if heavy else 1, **run})
    if pair is not None:
        cases = [{**case, "pair": [str(path) for path in pair]} for case in cases]
    return cases


# a fusing model's runs without its fusion: (the task that has it, None: every task; the
# estimate's options)
ANSWERS = {"no-fuse": (None, {"fuse": False}), "self-fuse": ("stereo", {"self_fuse": True})}


def refines_by_default(spec: ModelSpec) -> bool:
    """Whether a default run of ``spec``'s model refines: its fused network's setting where it
    fuses with one (:class:`~crossview.models.registry.FusedNetwork`), else its ``refine``."""
    if spec.fuse and spec.fused_network is not None:
        return spec.fused_network.refine
    return spec.refine


def measure(case: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration in this process (the child side)."""
    device = case.get("device", "cpu")
    torch.set_num_threads(case["threads"])
    if "classical" in case:
        return _measure_classical(case)
    set_backend(case["backend"])
    name = MODELS.get(case["model"], case["model"])
    spec = get_spec(name)
    shipped = spec.weights_path
    model = (load_model(name) if shipped is not None and shipped.is_file()
             else build_model(name)).eval().to(device)
    h, w = case["size"]
    answer = ANSWERS[case["answer"]][1] if "answer" in case else {}
    fuse = fuses(model, None) and not answer
    preset = case.get("preset")
    # a fused pair above the model's max_pixels runs whole at its working size
    shape = working_size(model, spec.task, fuse, None, (h, w), preset=preset) or (h, w)
    lri, refine, size = network_settings(model, spec.task, fuse, None, case.get("refine"), None,
                                         shape, preset=preset)
    first, second = (image.to(device) for image in bench_pair(h, w, case.get("pair")))
    estimate = ESTIMATE[spec.task]
    cpu: list[float] = []

    def run() -> None:
        started = time.process_time()
        estimate(first, second, model=model, precision=case["precision"], device=device,
                 refine=refine, preset=preset, **answer)
        cpu.append(time.process_time() - started)

    stats = time_call(synchronized(run, device), repeats=case["repeats"], warmup=case["warmup"])
    timed_cpu = sorted(cpu[case["warmup"]:])
    row = {**case, "task": spec.task, "refine": refine, "lri": lri, "fuse": fuse,
           "network_size": list(size or shape),
           "median_s": stats["median_s"], "min_s": stats["min_s"],
           "cpu_s": timed_cpu[len(timed_cpu) // 2], "peak_rss_mib": peak_rss_bytes() / 2**20,
           "status": "ok"}
    if device == "cuda":  # the whole process's peak: model, images and every timed call
        row["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return row


def check_pair(pair: Sequence[str]) -> None:
    """Read both image files of ``pair``: an unreadable one raises
    :class:`~crossview.errors.UserError` before any case runs."""
    for path in pair:
        read_image(path)


def bench_pair(h: int, w: int, pair: Sequence[str] | None = None,
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The benchmark pair ``[1, 3, H, W]`` (0..255): the two image files of ``pair`` resized to
    H x W (area interpolation); without ``pair``, random, the second image the first moved left
    by :data:`SHIFT_FRACTION` of the width (a stereo pair's right view, or a flow pair's second
    frame)."""
    if pair is not None:
        import cv2  # the baselines extra, as the fusion itself

        return tuple(torch.from_numpy(cv2.resize(read_image(path), (w, h),
                                                 interpolation=cv2.INTER_AREA))
                     .permute(2, 0, 1)[None].float() for path in pair)
    generator = torch.Generator().manual_seed(0)
    left = torch.rand(1, 3, h, w, generator=generator) * 255
    return left, torch.roll(left, -round(w * SHIFT_FRACTION), dims=3)


def _measure_classical(case: dict[str, Any]) -> dict[str, Any]:
    """One of :data:`CLASSICAL` on the benchmark pair as uint8 images (OpenCV's own threads
    set to the case's)."""
    import cv2  # the baselines extra, as the fusion itself

    cv2.setNumThreads(case["threads"])
    left, right = (image[0].permute(1, 2, 0).round().to(torch.uint8).numpy().copy()
                   for image in bench_pair(*case["size"], case.get("pair")))
    match = CLASSICAL[case["classical"]]
    cpu: list[float] = []

    def run() -> None:
        started = time.process_time()
        match(left, right)
        cpu.append(time.process_time() - started)

    stats = time_call(run, repeats=case["repeats"], warmup=case["warmup"])
    timed_cpu = sorted(cpu[case["warmup"]:])
    return {**case, "median_s": stats["median_s"], "min_s": stats["min_s"],
            "cpu_s": timed_cpu[len(timed_cpu) // 2], "peak_rss_mib": peak_rss_bytes() / 2**20,
            "status": "ok"}


def run_case(case: dict[str, Any], timeout: float) -> dict[str, Any]:
    """:func:`measure` in a child process; a failure becomes a row with its reason."""
    try:
        done = subprocess.run([sys.executable, "-m", "crossview.bench.model", json.dumps(case)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**case, "status": f"timeout after {timeout:.0f} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["killed"])[-1]
        return {**case, "status": f"failed ({done.returncode}): {last[:120]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_model(cases: Sequence[dict[str, Any]], *, timeout: float = 1800,
                on_case: Callable[[str], None] | None = None,
                on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
                ) -> list[dict[str, Any]]:
    """Run every case; fused rows get ``ratio`` = reference median / fused median (same run)
    and ``vs_fp32`` = fused fp32 median / this median. ``on_rows`` sees the rows after every
    case (to save partial results of a long run)."""
    rows: list[dict[str, Any]] = []
    for case in cases:
        if on_case:
            on_case(f"{case['model']} {case['size'][0]}x{case['size'][1]} "
                    f"{case['precision']} {case['backend']}")
        rows.append(run_case(case, timeout))
        _add_ratios(rows)
        if on_rows:
            on_rows(rows)
    return rows


def _add_ratios(rows: list[dict[str, Any]]) -> None:
    medians = {_key(r): r["median_s"] for r in rows if r["status"] == "ok"}
    classical = {(r["classical"], tuple(r["size"])): r["median_s"] for r in rows
                 if r["status"] == "ok" and "classical" in r}
    for row in rows:
        if row["status"] == "ok":
            for name, column in (("SGBM filled", "vs_sgbm"), ("DIS", "vs_dis")):
                theirs = classical.get((name, tuple(row["size"])))
                row[column] = row["median_s"] / theirs if theirs else None
        if row["status"] == "ok" and row["backend"] not in ("reference", "opencv"):
            reference = medians.get(_key(row, "reference"))
            row["ratio"] = reference / row["median_s"] if reference else None
            fp32 = medians.get(_key(row, row["backend"], "fp32"))
            row["vs_fp32"] = fp32 / row["median_s"] if fp32 else None


def _key(row: dict[str, Any], backend: str | None = None, precision: str | None = None) -> tuple:
    return (row["model"], tuple(row["size"]), precision or row["precision"],
            backend or row["backend"], row.get("refine"), row.get("preset"), row.get("answer"))


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))))
