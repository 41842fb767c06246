#!/usr/bin/env bash
# make demo: trace the bundled cold-start workload twice, cold then warm,
# and compare. Needs root (sudo) for the eBPF probes.
set -euo pipefail
coldtrace=${1:-bin/coldtrace}
here=$(cd "$(dirname "$0")" && pwd)
work=${COLDTRACE_DEMO_DIR:-/var/tmp/coldtrace-demo}
python=$(command -v python3) || { echo "demo needs python3" >&2; exit 1; }
python=$("$python" -c 'import sys; print(sys.executable)')

mkdir -p "$work/models"
model="$work/models/demo.safetensors"
if [ ! -s "$model" ]; then
  echo "demo: writing a 384 MiB stand-in model to $model"
  head -c $((384 << 20)) /dev/urandom > "$model"
  sync "$model"
fi
export TRITON_CACHE_DIR="$work/triton-cache"
rm -rf "$TRITON_CACHE_DIR"
# Make the run cold: drop the model from the page cache (only this file).
dd if="$model" iflag=nocache count=0 status=none

echo "== cold run =="
"$coldtrace" -o "$work/cold.ctrace" --json "$work/cold.json" -- "$python" "$here/main.py" "$model"
echo
echo "== warm run (model in page cache, kernel in the cache) =="
"$coldtrace" -q -o "$work/warm.ctrace" -- "$python" "$here/main.py" "$model"
echo
if "$coldtrace" help | grep -q "coldtrace diff"; then
  echo "== coldtrace diff cold warm =="
  "$coldtrace" diff "$work/cold.ctrace" "$work/warm.ctrace"
else
  "$coldtrace" report "$work/warm.ctrace"
fi
echo
echo "records: $work/cold.ctrace $work/warm.ctrace (coldtrace report FILE)"
