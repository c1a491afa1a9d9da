#!/bin/bash
# Held-out evaluation of the bundled 2499-step weights with the grid-frame fix, and the diagnosis.
set -e
cd /work/main
export OMP_NUM_THREADS=1
W=runs/tm-s3-fix/init.safetensors   # = the bundled 2499-step weights
python -m crossview.train.semantic evaluate --grid 15 --pairs 32 --weights $W --json runs/tm-s3-eval/bundled_fixed_32.json
python docs/results/transformatcher_diagnosis.py $W 32
python -m crossview.train.semantic evaluate --grid 15 --pairs 96 --weights $W --json runs/tm-s3-eval/bundled_fixed_96.json
