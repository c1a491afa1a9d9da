#!/bin/bash
# Held-out evaluation (32 and 96 pairs, raw and refined in one run) of a retrained run's weights.
set -e
cd /work/main
export OMP_NUM_THREADS=1
V=$1
python -m crossview.train.semantic evaluate --grid 15 --pairs 96 --weights runs/tm-s3-$V/final.safetensors --json runs/tm-s3-eval/${V}_96.json
python -m crossview.train.semantic evaluate --grid 15 --pairs 32 --weights runs/tm-s3-$V/final.safetensors --json runs/tm-s3-eval/${V}_32.json
