#!/usr/bin/env bash
# The GPU measurements in one go, into one results folder (under 8 minutes on
# one recent GPU; on CPU, `--quick` checks the script in about two minutes).
#
#   bash benchmarks/gpu.sh [--quick] [OUT]     # OUT default: results/gpu/<date>-<time>
#
# 1. memory_scaling at the sizes that fit a GPU's time budget: RK4 from 1e2 to 1e5
#    steps under full, checkpoint, backsolve and windowed (each configuration in
#    its own process, so that every runtime peak is its own; the figure is the
#    device allocator's, labelled "device allocator (gpu)" in the records, not a
#    CPU high-water mark), the compile-only estimate at 21.6 M steps, and bfloat16
#    products against float32 (compiled memory and gradient error).
# 2. benchmarks.devices: training steps per second on 1, 2, ... up to every local
#    GPU (data parallelism over a ltc_jax.training.data_mesh).
#
# The environment (nvidia-smi, jax's devices) goes to OUT/environment.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
if [[ "${1:-}" == "--quick" ]]; then
    quick=1
    shift
fi
out="${1:-results/gpu/$(date +%Y%m%d-%H%M%S)}"
if [[ -e "$out" ]]; then
    echo "$out exists already; runs are never overwritten." >&2
    exit 2
fi
mkdir -p "$out"

backend=$(python -c "import jax; print(jax.default_backend())")
count=$(python -c "import jax; print(jax.local_device_count())")
{
    date -u
    nvidia-smi 2>/dev/null || echo "no nvidia-smi"
    python -c "import jax; print(jax.__version__, jax.devices())"
} > "$out/environment.txt"

if [[ $quick == 1 ]]; then
    steps=(100)
    precision_steps=100
    estimate=(21600000)
    devices_options=(--quick)
else
    steps=(100 1000 10000 100000)
    precision_steps=10000
    estimate=(21600000)
    devices_options=()
fi
if [[ $backend == cpu ]]; then
    counts=(1 2)
else
    counts=($(seq 1 "$count"))
fi

timeout 360 python -m experiments.memory_scaling \
    --steps "${steps[@]}" --checkpoints --windows \
    --modes full checkpoint backsolve windowed \
    --estimate-steps "${estimate[@]}" --window-memory-counts \
    --adaptive-max-steps --saves --cost-window-seconds 0 \
    --count-evaluations-up-to 0 --precision-steps "$precision_steps" \
    --out "$out/memory_scaling"

timeout 120 python -m benchmarks.devices "${devices_options[@]}" \
    --backend "$backend" --device-counts "${counts[@]}" --out "$out/devices"

echo "results in $out"
