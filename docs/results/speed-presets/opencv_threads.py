"""The fused defaults' time with OpenCV's threads shared out among the matchers that run side
by side (:mod:`crossview.models.dense.opencv_threads`) against each call taking OpenCV's whole
pool, in one run, outputs checked equal bit for bit (``ab_timing.py``).

Run: ``OMP_NUM_THREADS=2 python docs/results/speed-presets/opencv_threads.py OUT.json
../shared/real-dev/kitti2012_000070 ../shared/real-dev/kitti2012_flow_000045 --repeats 7``
"""

from __future__ import annotations

import contextlib

from ab_timing import ab_arguments, time_variants

from crossview.models.dense import dis_fusion, sgbm_fusion
from crossview.models.dense.opencv_threads import shared_opencv_threads

FUSIONS = (sgbm_fusion, dis_fusion)


def whole_pool(workers: int) -> contextlib.AbstractContextManager[None]:
    """Each call keeps OpenCV's whole thread pool (how the fusions ran before)."""
    return contextlib.nullcontext()


def main() -> None:
    args = ab_arguments(__doc__)

    def threads(manager):
        def put_in_place() -> None:
            for fusion in FUSIONS:
                fusion.shared_opencv_threads = manager
        return put_in_place

    try:
        time_variants({"whole pool each": threads(whole_pool),
                       "pool shared": threads(shared_opencv_threads)},
                      args.stereo, args.flow, args.repeats, args.out)
    finally:
        threads(shared_opencv_threads)()


if __name__ == "__main__":
    main()
