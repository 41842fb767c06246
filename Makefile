# coldtrace: build, test, demo, benchmarks.
GO ?= go
BIN := bin/coldtrace
export CGO_CFLAGS ?= -Wno-deprecated-declarations

.PHONY: build test test-unit lint fuzz demo generate vmlinux check-generated bench bench-smoke clean

build:
	$(GO) build -o $(BIN) ./cmd/coldtrace

# All tests. The eBPF tests need root and a BTF kernel; elsewhere they
# skip and say why.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -p 1 -timeout 20m ./...

# Tests that need neither root nor a kernel to trace: any machine with Go and
# cgo. -short makes every eBPF and root test skip (internal/testenv).
test-unit:
	$(GO) test -count=1 -short ./...

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# gofmt, vet, staticcheck, and go.mod as `go mod tidy` leaves it.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out" >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy -diff

# Fuzz the record decoder and the comparison of two records, FUZZTIME
# each (go test -fuzz takes one target at a time). Seeds: the recorded runs
# under testdata/records and each package's testdata/fuzz/<Target>; new
# inputs go to Go's fuzz cache, a crasher to the package's testdata/fuzz.
# Minimizing each new input (60 s by default) held both workers for most
# of a 30 s run (FuzzCompare: 2 new inputs, 68 with 3 s).
FUZZTIME ?= 30s
FUZZMINIMIZETIME ?= 3s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./record
	$(GO) test -run '^$$' -fuzz '^FuzzCompare$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./attribution/compare

# Build coldtrace and trace the bundled cold-start workload.
demo: build
	bash testdata/demo/run.sh $(BIN)

# Rebuild the BPF objects (one per sensor, bpf/<sensor>/) with Debian's
# clang (apt-get install -y clang llvm libbpf-dev).
generate:
	$(GO) generate ./bpf/...

# Regenerate bpf/include/vmlinux.h from the running kernel's BTF.
vmlinux:
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > bpf/include/vmlinux.h

# Fails when the committed bpf2go outputs differ from what the sources build.
check-generated: generate
	git diff --exit-code -- bpf/ || (echo "bpf2go outputs are stale: run 'make generate' and commit" >&2; exit 1)

bench: build
	$(GO) run ./cmd/bench -coldtrace $(BIN) -json bin/bench.json $(BENCHFLAGS)

bench-smoke: build
	$(GO) run ./cmd/bench -coldtrace $(BIN) -smoke

clean:
	rm -rf bin

# The scripted libnvidia-ml.so.1 (testdata/gpu/fakenvml.c) for GPU tests
# on machines without one: LD_LIBRARY_PATH=bin/fake-nvml and
# FAKE_NVML_SCENARIO=testdata/gpu/scenarios/NAME. nvml.h is go-nvml's.
NVML_H_DIR = $(shell $(GO) list -m -f '{{.Dir}}' github.com/NVIDIA/go-nvml)/pkg/nvml
.PHONY: fake-nvml
fake-nvml:
	mkdir -p bin/fake-nvml
	gcc -shared -fPIC -O2 -Wall -Wextra -Werror -fvisibility=hidden -DNVML_NO_UNVERSIONED_FUNC_DEFS \
		-I$(NVML_H_DIR) -o bin/fake-nvml/libnvidia-ml.so.1 testdata/gpu/fakenvml.c
