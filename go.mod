module github.com/coldtrace/coldtrace

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/cilium/ebpf v0.22.0
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/prometheus/procfs v0.19.2
	github.com/spf13/pflag v1.1.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
