# coldtrace: build, test, demo, benchmarks.
GO ?= go
BIN := bin/coldtrace
export CGO_CFLAGS ?= -Wno-deprecated-declarations

.PHONY: build test test-unit test-kernel test-e2e shapes schemas lint fuzz demo generate vmlinux check-generated bench bench-smoke clean

build:
	$(GO) build -o $(BIN) ./cmd/coldtrace

# Packages whose tests need root (testenv.RequireRoot, RequireTracing),
# found by their tests so that a package gaining a kernel test joins
# test-kernel without an edit here. The binaries (cmd/) and the tests of
# the built binary (test/) are test-e2e's.
KERNEL_PKGS = $(filter-out ./cmd/% ./test/%,$(call pkgs_calling,$(kernel_test_re)))
# The built coldtrace against real tools (test/e2e), the binaries' own
# tests (cmd/coldtrace's run its test binary as coldtrace where they hold
# it mid-run or call it in-process), and every other package with a test
# that -short skips without needing root (chromium renders report/bench's
# plot).
E2E_PKGS = ./test/... ./cmd/... $(filter-out ./cmd/% ./test/% $(KERNEL_PKGS),$(call pkgs_calling,$(short_test_re)))
kernel_test_re := testenv\.Require(Root|Tracing)\(
short_test_re := testing\.Short\(\)
pkgs_calling = $(shell grep -rlE --include='*_test.go' '$(1)' . | xargs -r -n1 dirname | sort -u)

# The three test targets `make test` runs, in order. CI runs test-unit as
# nobody beforehand and sets TEST_TARGETS="test-kernel test-e2e".
TEST_TARGETS ?= test-unit test-kernel test-e2e

# vet, then every test target; each one runs even when one before it
# failed, and its wall time is printed at the end. The eBPF tests need
# root and a BTF kernel; elsewhere they skip and say why.
test:
	$(GO) vet ./...
	@summary=""; status=0; \
	for target in $(TEST_TARGETS); do \
		start=$$(date +%s); result=""; \
		$(MAKE) --no-print-directory $$target || { status=1; result=" FAILED"; }; \
		summary="$$summary$$target: $$(( $$(date +%s) - start ))s$$result\n"; \
	done; \
	printf "$$summary"; exit $$status

# Tests that need neither root nor a kernel to trace: any machine with Go and
# cgo, packages in parallel. -short makes every eBPF, root and real-tool test
# skip (internal/testenv). The kernel and e2e packages' own unit tests run
# here and again in their full pass: a few seconds, kept so that this target
# alone covers every unit test.
test-unit:
	$(GO) test -count=1 -short -timeout 10m ./...

# The packages with kernel tests, in full, as root: they load eBPF programs,
# drop caches and evict pages, so one package at a time (two at once would
# see each other's page-cache traffic).
test-kernel:
	@[ "$$(id -u)" = 0 ] || echo "test-kernel: not root, the kernel tests skip" >&2
	$(GO) test -count=1 -p 1 -timeout 20m $(KERNEL_PKGS)

# coldtrace against real programs (cc, python3, numba, torch, prometheus,
# chromium), as root, one package at a time for the same reason.
test-e2e:
	@[ "$$(id -u)" = 0 ] || echo "test-e2e: not root, the traced tests skip" >&2
	$(GO) test -count=1 -p 1 -timeout 20m $(E2E_PKGS)

# The shape generator's random sweep (testdata/shapes/gen.py), as root:
# N seeds from SEED (random when unset; the test log says which). test-e2e
# traces its fixed list; a failing seed prints the command that replays it.
N ?= 500
SEED ?=
shapes:
	SHAPES_N=$(N) SHAPES_SEED=$(SEED) $(GO) test -count=1 -timeout 120m -run '^TestShapes$$' ./test/e2e

# Rewrite docs/schemas from the Go types of the JSON documents; each
# package's TestJSONSchema holds the committed files to those types.
schemas:
	COLDTRACE_UPDATE_SCHEMAS=1 $(GO) test -count=1 -run '^TestJSONSchema$$' ./...

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
