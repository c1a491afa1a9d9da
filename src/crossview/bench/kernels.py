"""``crossview bench kernels``: compile every Triton kernel variant that the published
MatchStereo / MatchFlow models use, for a GPU architecture, on the CPU (no GPU needed): compile
time, lines of PTX, registers per thread and spilled bytes of each.

The variants come from the models' configurations: at every decoder scale, ``dim / heads``
channels per head and that scale's radius; the forward, the backward's row kernel and its key
kernel, in each dtype asked for. (The models run MatchAttention in their fields' dtype, float32
even under bf16/fp16 autocast; float16 and bfloat16 are what :func:`match_attention` itself
takes.) Self- and cross-attention share a variant: whether the weights are written or receive
a gradient is a runtime flag, and shapes are not specialised.

The compiles run in a child process without ``TRITON_INTERPRET`` (under it Triton builds
interpreted kernels, which compile to nothing) and with an empty, temporary Triton cache, so
every time is a full compile: Triton's frontend, LLVM and ``ptxas``, one after another, as on
a GPU machine's first launch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import crossview
from crossview.errors import UserError
from crossview.models.matchstereo.config import VARIANTS, MatchStereoConfig

# The published models (crossview.models.matchstereo.specs registers them with these configs).
PUBLISHED: dict[str, MatchStereoConfig] = {
    "matchstereo-t": VARIANTS["tiny"], "matchstereo-s": VARIANTS["small"],
    "matchstereo-b": VARIANTS["base"], "matchflow-b": VARIANTS["base"],
}
SHORT_NAMES = {"matchstereo-t": "T", "matchstereo-s": "S", "matchstereo-b": "B",
               "matchflow-b": "F"}
DTYPES = ("float32", "float16", "bfloat16")
TARGETS = ("sm_90",)
# The compile check: a variant compiling longer than this (on the 2-core CI machine) or
# spilling registers fails the test.
MAX_COMPILE_S = 10.0
# MatchStereo-T's first image pair on a GPU may spend this long compiling.
MAX_FIRST_PAIR_S = 30.0
COLUMNS = ["variant", "target", "compile s", "cpu s", "PTX lines", "registers", "spilled bytes",
           "models", "status"]
PTXAS_FIELDS = ("registers", "spills", "spill_stores", "spill_loads", "stack_bytes")


def scales(config: MatchStereoConfig) -> list[tuple[int, int]]:
    """``(radius, channels per head)`` of each decoder scale with MatchAttention layers,
    coarse to fine."""
    return [(radius, dim // config.heads) for dim, radius, layers
            in zip(config.decoder_dims, config.radii, config.decoder_layers, strict=True)
            if layers > 0]


def model_variants(models: Sequence[str], dtypes: Sequence[str], *,
                   backward: bool = True) -> dict[Any, list[str]]:
    """Every kernel variant (:class:`crossview.attention.match.gpu_compile.Variant`) that
    ``models`` (keys of :data:`PUBLISHED`) run in ``dtypes``, forward and (with ``backward``)
    backward, each with the short names of the models using it (``["T", "S"]``), in order of
    first use."""
    # gpu_compile imports Triton, the optional `gpu` extra: needed only when kernels are listed
    from crossview.attention.match.gpu_compile import Variant

    used: dict[Variant, list[str]] = {}
    for dtype in dtypes:
        for model in models:
            for radius, channels in scales(PUBLISHED[model]):
                variants = [Variant("forward", dtype, channels, channels, radius)]
                if backward:
                    variants += [Variant("backward_rows", dtype, channels, channels, radius),
                                 Variant("backward_keys", dtype, channels, channels, None)]
                for variant in variants:
                    names = used.setdefault(variant, [])
                    if SHORT_NAMES[model] not in names:
                        names.append(SHORT_NAMES[model])
    return used


def compile_variants(variants: Iterable[Any], targets: Sequence[str], *,
                     on_row: Callable[[dict[str, Any]], None] | None = None,
                     ) -> list[dict[str, Any]]:
    """Compile each variant for each target in a child process (see the module docstring);
    returns the rows of :func:`crossview.attention.match.gpu_compile.compile_variant`, target
    by target. ``on_row`` sees each row as it comes. Raises :class:`UserError` if Triton is
    missing or a compile fails."""
    if importlib.util.find_spec("triton") is None:
        raise UserError("compiling the GPU kernels needs Triton: pip install 'crossview[gpu]'")
    variants = list(variants)
    request = json.dumps({"variants": [v.to_json() for v in variants], "targets": list(targets)})
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    # the child imports this crossview, wherever it was found
    package_root = str(Path(crossview.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="crossview-triton-cache-") as cache, \
            tempfile.TemporaryFile("w+") as errors:
        env["TRITON_CACHE_DIR"] = cache
        child = subprocess.Popen([sys.executable, "-m", "crossview.bench.kernels"], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                 text=True)
        try:
            child.stdin.write(request)
            child.stdin.close()
            for line in child.stdout:
                row = json.loads(line)
                rows.append(row)
                if on_row is not None:
                    on_row(row)
            code = child.wait()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        if code != 0:
            errors.seek(0)
            tail = errors.read()[-2000:].strip()
            raise UserError(f"compiling the Triton kernels failed (exit code {code}):\n{tail}")
    return rows


def status(row: dict[str, Any]) -> str:
    """``"ok"``, ``"same kernel as VARIANT"`` (Triton specialises it alike: compiled once), or
    what is wrong: spills, a compile over :data:`MAX_COMPILE_S` CPU seconds (CPU time: on a
    busy machine the wall-clock time is mostly waiting)."""
    problems = []
    if row["spills"]:
        problems.append("spills")
    if row["cpu_s"] > MAX_COMPILE_S:
        problems.append(f"over {MAX_COMPILE_S:.0f} s")
    if not problems and "same_as" in row:
        return f"same kernel as {row['same_as']}"
    return ", ".join(problems) or "ok"


def first_use(rows: Sequence[dict[str, Any]], used: dict[Any, list[str]], model: str = "T",
              dtype: str = "float32") -> dict[str, dict[str, float]]:
    """What ``model``'s first image pair (its forward variants) and first training step
    (forward and backward) wait for on a GPU with an empty Triton cache, per target, in
    ``dtype``: ``{"first_pair_s", "first_pair_cpu_s", "first_pair_kernels", "first_step_s",
    ...}``, the sums over the distinct kernels (Triton's hash) of their compile times. A target
    whose rows lack some of them is left out."""
    wanted = {"first_pair": {v.name for v, names in used.items() if model in names
                             and v.dtype == dtype and v.kernel == "forward"},
              "first_step": {v.name for v, names in used.items()
                             if model in names and v.dtype == dtype}}
    result: dict[str, dict[str, float]] = {}
    for target in dict.fromkeys(row["target"] for row in rows):
        mine = [row for row in rows if row["target"] == target]
        first = {}  # the compile of each distinct kernel: its first row
        for row in mine:
            first.setdefault(row["hash"], row)
        by_name = {row["variant"]: first[row["hash"]] for row in mine}
        sums: dict[str, float] = {}
        for label, names in wanted.items():
            if names and names <= by_name.keys():
                kernels = {by_name[name]["hash"]: by_name[name] for name in names}.values()
                sums[f"{label}_s"] = sum(row["compile_s"] for row in kernels)
                sums[f"{label}_cpu_s"] = sum(row["cpu_s"] for row in kernels)
                sums[f"{label}_kernels"] = len(kernels)
        if sums:
            result[target] = sums
    return result


def table_rows(rows: Sequence[dict[str, Any]], used: dict[Any, list[str]]) -> list[list[Any]]:
    """Rows of :data:`COLUMNS`."""
    models = {v.name: ",".join(names) for v, names in used.items()}
    return [[row["variant"], row["target"], row["compile_s"], row["cpu_s"], row["ptx_lines"],
             row["registers"], row["spills"], models.get(row["variant"], "-"), status(row)]
            for row in rows]


def _worker() -> None:
    """The child process: compile the variants of the JSON request on stdin, one JSON row per
    line on stdout."""
    # gpu_compile imports Triton, the optional `gpu` extra: the child process is where it runs
    from crossview.attention.match.gpu_compile import Variant, compile_variant

    request = json.load(sys.stdin)
    variants = [Variant(**v) for v in request["variants"]]
    compiled: dict[str, dict[str, Any]] = {}  # by Triton's hash: the first variant compiled
    for target in request["targets"]:
        for variant in variants:
            row = compile_variant(variant, target)
            first = compiled.setdefault(row["hash"], row)
            if first is not row:  # Triton specialises it as an earlier one: one kernel for both
                row.update({key: first[key] for key in PTXAS_FIELDS}, same_as=first["variant"])
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    _worker()
