#!/usr/bin/env bash
# One prepared GPU check (issue 7 / 8): run it through the `device` tool when a session has the
# H200 machine, e.g. run(command="bash scripts/device_check.sh", timeout_s=540).
# Everything it measures lands in $OUT (defaults to ./device-out when run by hand). The
# device image has python3 (3.12) with torch 2.11 + CUDA; nothing else needs installing.
set -uo pipefail
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export PYTHONPATH=src
python3 -c "import torch, sys; assert torch.cuda.is_available(), 'no CUDA'; \
print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" \
    || { echo "no usable CUDA torch here"; exit 3; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv > "$OUT/nvidia-smi.csv"
timeout 200 python3 -m roofline measure peaks --device cuda --hw h200 --out "$OUT/h200-measured.toml" \
    --calibration-out "$OUT/calib-peaks.toml" > "$OUT/peaks.txt" 2>&1; echo "peaks rc=$?"
timeout 200 python3 -m roofline measure ops --device cuda --hw h200 --calibration-out "$OUT/calib-ops.toml" \
    --json > "$OUT/ops.json" 2> "$OUT/ops.err"; echo "ops rc=$?"
timeout 60 python3 -m roofline trace examples/llama_block.py:main --device cuda --hw h200 --time \
    > "$OUT/trace.txt" 2>&1; echo "trace rc=$?"
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_measure_torch.py -k cuda \
    > "$OUT/pytest.txt" 2>&1; echo "pytest rc=$?"
tail -40 "$OUT/peaks.txt"; tail -5 "$OUT/trace.txt"; tail -3 "$OUT/pytest.txt"
