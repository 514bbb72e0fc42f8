#!/usr/bin/env bash
# The one prepared GPU check (issue 17): run it through the `device` tool when a session has
# the H200 machine, e.g. run(command="bash scripts/device_check.sh", timeout_s=400), which
# leaves time for one rerun in the 15-minute budget (the steps' own timeouts add up to 390 s;
# the most important steps run first, and whatever is written before a timeout comes back).
# Everything lands in $OUT (./device-out when run by hand); commit it under
# benchmarks/results/h200/. The device image has python3 with torch + CUDA; nothing else
# needs installing. tests/test_project.py checks that every `roofline` command below parses
# against the CLI.
#
#   DEVICE=cpu QUICK=1 bash scripts/device_check.sh   # a smoke run of the same steps here
set -uo pipefail
OUT=${OUT:-device-out}
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:+--quick}
mkdir -p "$OUT"
export PYTHONPATH=src
python3 - > "$OUT/env.txt" <<'EOF' || { echo "no usable torch here"; exit 3; }
import datetime, os, platform, torch
device = os.environ.get("DEVICE", "cuda")
assert device == "cpu" or torch.cuda.is_available(), "no CUDA"
print("date", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
if device == "cuda":
    print("gpu", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
EOF
cat "$OUT/env.txt"
if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,power.limit,driver_version \
        --format=csv > "$OUT/nvidia-smi.csv" 2>&1
fi

# 1. peaks per dtype and the bandwidth plateaus (HBM, L2), with an empirical chip file
timeout 120 python3 -m roofline measure peaks --device "$DEVICE" --hw h200 $QUICK \
    --out "$OUT/h200-measured.toml" --calibration-out "$OUT/calib-peaks.toml" \
    > "$OUT/peaks.txt" 2>&1; echo "peaks rc=$?"
# 2. >= 20 ops against their bound: seed 2.9's batch sweep, square / skinny GEMMs in every
#    dtype (fp8 via torch._scaled_mm, int8 via torch._int_mm), elementwise, SDPA prefill and
#    decode
timeout 120 python3 -m roofline measure ops --device "$DEVICE" --hw h200 $QUICK \
    --calibration-out "$OUT/calib-ops.toml" --json > "$OUT/ops.json" 2> "$OUT/ops.err"
echo "ops rc=$?"
# 3. real code traced and timed
timeout 45 python3 -m roofline trace examples/llama_block.py:main --device "$DEVICE" --hw h200 \
    --time > "$OUT/trace.txt" 2>&1; echo "trace rc=$?"
# 4. the CUDA-only tests
timeout 45 python3 -m pytest -q -p no:cacheprovider tests/test_measure_torch.py -k cuda \
    > "$OUT/pytest.txt" 2>&1; echo "pytest rc=$?"
# 5. Nsight Compute's roofline of one GEMM beside ours, where ncu runs
python3 -m roofline op matmul --m 8192 --k 8192 --n 8192 --hw h200 --json \
    > "$OUT/ncu-gemm-bound.json" 2>&1
if command -v ncu > /dev/null && [ "$DEVICE" = cuda ]; then
    timeout 60 ncu --target-processes all --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section SpeedOfLight_RooflineChart --section MemoryWorkloadAnalysis \
        python3 scripts/ncu_gemm.py > "$OUT/ncu-gemm.txt" 2>&1; echo "ncu rc=$?"
else
    echo "ncu: not run (no ncu here)" | tee "$OUT/ncu-gemm.txt"
fi

# what to look at first: any op faster than its bound is a bug (ours or the timing's)
python3 - "$OUT/ops.json" <<'EOF'
import json, sys
try:
    data = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"ops.json unreadable: {exc}")
points = data["points"]
print(f"{len(points)} ops timed, {len(data.get('skipped', []))} skipped")
for p in points:
    flag = "  FASTER THAN THE BOUND" if p["efficiency"] and p["efficiency"] > 1.03 else ""
    print(f"{p['efficiency'] or 0:6.3f}  {p['bound']:8s} {p['label']}{flag}")
EOF
tail -30 "$OUT/peaks.txt"; tail -5 "$OUT/trace.txt"; tail -3 "$OUT/pytest.txt"; tail -20 "$OUT/ncu-gemm.txt"
