#!/bin/bash
# TransforMatcher, continued from the bundled 2499-step weights with the grid-frame fix
# (frame_shift + position-true resampling of the stride-32 layers); Eq. 12 loss only (DENSE=0)
# or plus the dense loss (DENSE=1). lr 1e-3 until END1 (UTC), then 1e-4 for 8 minutes.
set -e
cd /work/main
export OMP_NUM_THREADS=1
RUN=$1; DENSE=${2:-0}; END1=${3:-05:36}
M1=$(( ($(date -u -d "$END1" +%s) - $(date -u +%s)) / 60 ))
python -m crossview.train.semantic train --run-dir $RUN --grid 15 --batch 2 --keypoints 128 \
    --lr 1e-3 --minutes $M1 --dense-weight $DENSE --init $RUN/init.safetensors
python -m crossview.train.semantic train --run-dir $RUN --grid 15 --batch 2 --keypoints 128 \
    --lr 1e-4 --minutes 8 --dense-weight $DENSE --export $RUN/final.safetensors
