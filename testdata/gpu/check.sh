#!/bin/sh
# testdata/gpu/check.sh: on a machine with an NVIDIA GPU, sample it while a
# small GPU workload runs, and print what coldtrace records.
#
#   testdata/gpu/check.sh           build (when Go is here) and run
#   testdata/gpu/check.sh --build   only build bin/gpu-check/{gpu.test,coldtrace},
#                                   to carry to a GPU machine without Go
#
# Steps:
#  1. nvidia-smi -L, to show what the machine has;
#  2. the workload: $COLDTRACE_GPU_WORKLOAD if set, else a PyTorch program
#     (matrix products for ~2 s with 2 GiB held) when python3 has torch and
#     CUDA, else nvidia-smi in a loop. With torch, a second, untraced
#     PyTorch process runs beside it, so the interference list has an entry;
#  3. the trace/gpu sampler on the real GPU (go test -run TestRealGPU -v),
#     printing the samples, the per-process samples, the interference and
#     the summaries; the JSON goes to /tmp/gpu-sampler.json;
#  4. when coldtrace builds and runs (root, eBPF), the whole tool:
#     coldtrace --json /tmp/gpu.json -- sh -c WORKLOAD, then the GPU section
#     and the breakdown of its JSON.
# Exit status: that of step 3. Step 4 failing is reported, not fatal, while
# the CLI wiring is under way.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=bin/gpu-check

build() {
	mkdir -p "$out" || return 1
	rm -f "$out/gpu.test"
	echo "== go test -c ./trace/gpu -> $out/gpu.test"
	go test -c -o "$out/gpu.test" ./trace/gpu 2>&1 | grep -v -e 'deprecated' -e 'cgo-gcc-prolog' -e 'nvml.h' -e '^ *[0-9]* |' -e '^ *|' -e '^In file included'
	[ -x "$out/gpu.test" ] || return 1
	echo "== go build ./cmd/coldtrace -> $out/coldtrace"
	rm -f "$out/coldtrace"
	go build -o "$out/coldtrace" ./cmd/coldtrace 2>&1 | grep -v -e 'deprecated' -e 'cgo-gcc-prolog' -e 'nvml.h' -e '^ *[0-9]* |' -e '^ *|' -e '^In file included' || true
	[ -x "$out/coldtrace" ] || echo "coldtrace did not build; step 4 will be skipped"
	return 0
}

if [ "${1:-}" = "--build" ]; then
	build
	exit $?
fi
if command -v go >/dev/null 2>&1; then
	build || { echo "build failed"; exit 1; }
elif [ ! -x "$out/gpu.test" ]; then
	echo "no Go here and no $out/gpu.test: run 'testdata/gpu/check.sh --build' on a machine with Go and carry $out"
	exit 1
fi

echo "== nvidia-smi -L"
nvidia-smi -L 2>&1 || echo "(nvidia-smi failed or is missing)"

torch_workload='import time, torch
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
t = time.time()
while time.time() - t < 2.0:
    y = x @ x
torch.cuda.synchronize()
time.sleep(0.5)
print("workload: done, %d MiB allocated" % (torch.cuda.memory_allocated() >> 20))'
other_workload='import time, torch
x = torch.randn(2048, 2048, device="cuda")
t = time.time()
while time.time() - t < 12.0:
    y = x @ x
    torch.cuda.synchronize()
    time.sleep(0.02)'

other=""
if [ -z "${COLDTRACE_GPU_WORKLOAD:-}" ]; then
	if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
		printf '%s\n' "$torch_workload" >/tmp/gpu-workload.py
		COLDTRACE_GPU_WORKLOAD="python3 /tmp/gpu-workload.py"
		printf '%s\n' "$other_workload" >/tmp/gpu-other.py
		python3 /tmp/gpu-other.py &
		other=$!
		echo "== untraced GPU process beside the run: pid $other"
		sleep 3 # let it reach the GPU
	else
		COLDTRACE_GPU_WORKLOAD='for i in 1 2 3 4 5 6; do nvidia-smi >/dev/null; sleep 0.3; done'
	fi
fi
export COLDTRACE_GPU_WORKLOAD
echo "== workload: $COLDTRACE_GPU_WORKLOAD"

echo "== go test ./trace/gpu -run TestRealGPU -v"
COLDTRACE_GPU_JSON=/tmp/gpu-sampler.json "$out/gpu.test" -test.run 'TestRealGPU' -test.count=1 -test.v
rc=$?

if [ -x "$out/coldtrace" ]; then
	echo "== coldtrace --json /tmp/gpu.json -- sh -c WORKLOAD"
	rm -f /tmp/gpu.json
	# Bounded: a hung tracer must not hang the check.
	timeout -k 5 120 "$out/coldtrace" --json /tmp/gpu.json -- sh -c "$COLDTRACE_GPU_WORKLOAD"
	echo "coldtrace exit status: $? (124/137: killed after 120 s)"
	if [ -s /tmp/gpu.json ]; then
		echo "== GPU section and breakdown of /tmp/gpu.json"
		python3 - /tmp/gpu.json <<'EOF' || cat /tmp/gpu.json
import json, sys
d = json.load(open(sys.argv[1]))
keep = {k: v for k, v in d.items() if k.startswith("gpu") or "breakdown" in k or k in ("wall_ns", "verdict")}
g = keep.get("gpu")
if isinstance(g, dict) and len(g.get("samples", [])) > 20:
    g["samples"] = g["samples"][:10] + ["…"] + g["samples"][-10:]
print(json.dumps(keep or d, indent=2))
EOF
	fi
else
	echo "== coldtrace not built: step 4 skipped"
fi

if [ -n "$other" ]; then
	kill "$other" 2>/dev/null
	wait "$other" 2>/dev/null
fi
exit $rc
