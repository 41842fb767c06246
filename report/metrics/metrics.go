package metrics

import (
	"fmt"
	"io"
	"path"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// Prefix starts every metric name.
const Prefix = "coldtrace_run_"

// maxCaches bounds the cache label: the registry of known caches is a few
// dozen; more than this (many --cache-dir) keeps the heaviest by misses.
const maxCaches = 32

// Grouping keys of a Pushgateway push. They are labels of every pushed
// metric; Registry leaves them out of the run labels it was asked to omit.
const (
	JobLabel      = "job"
	InstanceLabel = "instance"
	// DefaultJob is the job of a run without a job label.
	DefaultJob = "coldtrace"
)

// Group is where a run's metrics go on a Pushgateway: its job (the job
// label, else DefaultJob) and instance (the instance label, else the host
// label or the record's host name, with ":rank" + the rank label when
// there is one), so that each rank of a job replaces its own previous run.
func Group(r *record.Record) (job, instance string) {
	job = r.Labels[JobLabel]
	if job == "" {
		job = DefaultJob
	}
	if instance = r.Labels[InstanceLabel]; instance != "" {
		return job, instance
	}
	instance = r.Labels["host"]
	if instance == "" {
		instance = r.Host.Hostname
	}
	if instance == "" {
		instance = "unknown"
	}
	if rank := r.Labels["rank"]; rank != "" {
		instance += ":rank" + rank
	}
	return job, instance
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// Registry builds the metrics of one run; res is r's attribution (nil:
// computed here). Run labels named in omit are left out (a push's
// grouping keys, which the Pushgateway adds itself).
func Registry(r *record.Record, res *attribution.Result, omit ...string) (*prometheus.Registry, error) {
	if r == nil {
		return nil, fmt.Errorf("metrics: no record")
	}
	if err := CheckLabels(r.Labels); err != nil {
		return nil, fmt.Errorf("record labels: %w", err)
	}
	if res == nil {
		res = attribution.Analyze(r)
	}
	constLabels := prometheus.Labels{}
	for k, v := range r.Labels {
		constLabels[k] = v
	}
	for _, k := range omit {
		delete(constLabels, k)
	}
	reg := prometheus.NewRegistry()
	b := &builder{reg: reg, labels: constLabels}

	b.gauge("wall_seconds", "Wall-clock time of the traced command, from its release to its exit.", seconds(res.WallNS))
	cat := b.gaugeVec("category_seconds", "Wall time by category; the six categories sum to wall_seconds.", "category")
	for _, row := range res.Breakdown {
		cat.WithLabelValues(string(row.Category)).Set(seconds(row.NS))
	}
	b.gauge("warm_estimate_seconds", "What a rerun with every cache warm should take.", seconds(res.WarmEstimateNS))
	b.gauge("cold", "1 when the verdict is a cold start (the run read from disk, downloaded or compiled what a rerun finds), else 0.", boolValue(res.Cold))
	b.gauge("exit_code", "The command's exit code (128+N for death by signal N, 127 when it could not start).", float64(r.ExitCode))
	if !r.Start.IsZero() {
		b.gauge("start_timestamp_seconds", "When the command was released, in seconds since the Unix epoch.", float64(r.Start.UnixNano())/1e9)
	}
	info := b.gaugeVec("info", "1, with the command's name and coldtrace's version as labels.", "command", "version")
	info.WithLabelValues(commandName(r.Command), r.Version).Set(1)

	var fromDisk, missed, accessed uint64
	for _, f := range r.Files {
		fromDisk += f.BytesFromDisk
		missed += f.PagesMissed
		accessed += f.PagesAccessed
	}
	b.counter("disk_read_bytes_total", "Bytes the command's page-cache misses read from disk.", float64(fromDisk))
	b.counter("page_cache_misses_total", "Pages the command inserted into the page cache: they came from disk.", float64(missed))
	b.counter("page_cache_accesses_total", "Pages the command read or mapped through the page cache.", float64(accessed))
	b.counter("lost_events_total", "Events the kernel side could not record; non-zero means lower bounds.", float64(r.Lost.Total()))

	if r.JIT != nil && len(r.JIT.Caches) > 0 {
		hits := b.counterVec("cache_hits_total", "Kernel/JIT cache entries found (lookups that opened an existing entry).", "cache")
		misses := b.counterVec("cache_misses_total", "Kernel/JIT cache entries missed (lookups that failed or created the entry).", "cache")
		compile := b.gaugeVec("cache_compile_seconds", "Compile time between a cache's misses and their fills.", "cache")
		for _, c := range boundedCaches(r.JIT.Caches) {
			hits.WithLabelValues(c.Name).Add(float64(c.Hits))
			misses.WithLabelValues(c.Name).Add(float64(c.Misses))
			compile.WithLabelValues(c.Name).Set(seconds(c.CompileNS))
		}
	}

	var dlBytes uint64
	for _, d := range r.Downloads {
		dlBytes += d.Bytes
	}
	b.counter("downloads_total", "Network downloads (at least 4 MiB on one connection the command opened).", float64(len(r.Downloads)))
	b.counter("download_bytes_total", "Bytes the downloads received.", float64(dlBytes))

	if row := res.Row(attribution.GPUCompute); row != nil && len(row.GPUs) > 0 {
		busy := b.gaugeVec("gpu_busy_seconds", "GPU utilisation times time over the run, per device.", "gpu")
		for _, g := range row.GPUs {
			busy.WithLabelValues(strconv.Itoa(g.Index)).Set(seconds(g.BusyNS))
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	return reg, nil
}

// WriteText writes the registry in the Prometheus text format (what
// node_exporter's textfile collector reads).
func WriteText(w io.Writer, reg prometheus.Gatherer) error {
	families, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("gather metrics: %w", err)
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return fmt.Errorf("write metrics: %w", err)
		}
	}
	return nil
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// commandName is the base name of the command's program: the whole
// command line could hold secrets and is unbounded.
func commandName(cmd []string) string {
	if len(cmd) == 0 {
		return ""
	}
	return path.Base(cmd[0])
}

// boundedCaches keeps at most maxCaches caches with distinct names, the
// most missed first when there are more.
func boundedCaches(caches []record.Cache) []record.Cache {
	seen := map[string]bool{}
	var out []record.Cache
	for _, c := range caches {
		if c.Name == "" || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		out = append(out, c)
	}
	if len(out) > maxCaches {
		sortByMisses(out)
		out = out[:maxCaches]
	}
	return out
}

func sortByMisses(cs []record.Cache) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Misses > cs[j-1].Misses; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// builder registers metrics and keeps the first error.
type builder struct {
	reg    *prometheus.Registry
	labels prometheus.Labels
	err    error
}

func (b *builder) register(c prometheus.Collector, name string) {
	if err := b.reg.Register(c); err != nil && b.err == nil {
		b.err = fmt.Errorf("register %s%s: %w", Prefix, name, err)
	}
}

func (b *builder) gauge(name, help string, v float64) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + name, Help: help, ConstLabels: b.labels})
	g.Set(v)
	b.register(g, name)
}

func (b *builder) counter(name, help string, v float64) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: Prefix + name, Help: help, ConstLabels: b.labels})
	c.Add(v)
	b.register(c, name)
}

func (b *builder) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + name, Help: help, ConstLabels: b.labels}, labels)
	b.register(g, name)
	return g
}

func (b *builder) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + name, Help: help, ConstLabels: b.labels}, labels)
	b.register(c, name)
	return c
}
