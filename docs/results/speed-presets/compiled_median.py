"""The fused defaults' time with the colour-weighted median compiled against numpy's, in one
run: :func:`crossview.models.dense.inference.predict_fields` of the stereo pair (matchstereo-
hybrid) and the flow pair (matchflow-hybrid) at their own size, per preset, the two medians
taking turns at every repeat (a slow moment of a shared machine hits both alike); the median
of ``--repeats`` runs after one warm-up is kept. Each compiled run's output is checked equal to
numpy's, bit for bit.

Run: ``OMP_NUM_THREADS=2 python docs/results/speed-presets/compiled_median.py OUT.json
../shared/real-dev/kitti2012_000070 ../shared/real-dev/kitti2012_flow_000045 --repeats 7``
"""

from __future__ import annotations

from ab_timing import ab_arguments, time_variants

from crossview.geometry import edge_weighted_median


def main() -> None:
    args = ab_arguments(__doc__)
    compiled = edge_weighted_median._compiled_median
    if compiled() is None:
        raise SystemExit("the C++ kernels do not build here: nothing to compare")

    def median(chooser):
        return lambda: setattr(edge_weighted_median, "_compiled_median", chooser)

    try:
        time_variants({"numpy median": median(lambda: None), "compiled median": median(compiled)},
                      args.stereo, args.flow, args.repeats, args.out)
    finally:
        edge_weighted_median._compiled_median = compiled


if __name__ == "__main__":
    main()
