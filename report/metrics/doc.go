// Package metrics publishes a run's answer as Prometheus metrics, built
// with prometheus/client_golang: a registry from a record and its
// attribution, pushed to a Pushgateway (grouped by job and instance, each
// push replacing the previous run of that instance) or written for
// node_exporter's textfile collector.
//
// Every metric is a gauge or a counter of one run, named
// coldtrace_run_*, in base units (_seconds, _bytes; counts end in _total)
// and carrying the run's labels (record.Labels). Variable labels are
// bounded: category (six values), cache (the caches the run used), gpu
// (the devices).
package metrics
