module github.com/coldtrace/coldtrace

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1 // indirect
	github.com/chzyer/readline v1.5.1 // indirect
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/ianlancetaylor/demangle v0.0.0-20250417193237-f615e6bd150b // indirect
	github.com/prometheus/procfs v0.23.0 // indirect
	github.com/spf13/pflag v1.1.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
