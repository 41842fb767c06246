package metrics

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/common/model"
)

// reserved are label names coldtrace's own outputs use: the metrics'
// variable labels and the pprof samples' labels. A run label of one of
// these names would clash with them.
var reserved = []string{"category", "cache", "gpu", "command", "version", // metrics
	"comm", "file", "compiler", "pid", // pprof sample labels
	"le", "quantile"} // Prometheus's own

// CheckLabelName says why name cannot be a run label: not a Prometheus
// label name (the classic [a-zA-Z_][a-zA-Z0-9_]* that every Prometheus
// version accepts), reserved by Prometheus (a leading "__"), or used by
// coldtrace's outputs.
func CheckLabelName(name string) error {
	switch {
	case !model.LegacyValidation.IsValidLabelName(name):
		return fmt.Errorf("label name %q: want letters, digits and '_', not starting with a digit", name)
	case strings.HasPrefix(name, "__"):
		return fmt.Errorf("label name %q: names starting with __ are reserved by Prometheus", name)
	case slices.Contains(reserved, name):
		return fmt.Errorf("label name %q is used by coldtrace's own metrics or profiles (%s)", name, strings.Join(reserved, ", "))
	}
	return nil
}

// ParseLabels turns repeated "NAME=VALUE" flags into run labels, refusing
// bad names, empty or non-UTF-8 values and repeated names.
func ParseLabels(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		name, value, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("--label %q: want NAME=VALUE", p)
		}
		if err := CheckLabelName(name); err != nil {
			return nil, fmt.Errorf("--label %q: %w", p, err)
		}
		if value == "" {
			return nil, fmt.Errorf("--label %q: empty value (Prometheus treats it as no label)", p)
		}
		if !utf8.ValidString(value) {
			return nil, fmt.Errorf("--label %q: value is not UTF-8", p)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--label %q: %s given twice", p, name)
		}
		out[name] = value
	}
	return out, nil
}

// CheckLabels checks labels read from a record (which may come from
// anywhere) the way ParseLabels checks flags.
func CheckLabels(labels map[string]string) error {
	names := make([]string, 0, len(labels))
	for k := range labels {
		names = append(names, k)
	}
	sort.Strings(names)
	var pairs []string
	for _, k := range names {
		pairs = append(pairs, k+"="+labels[k])
	}
	_, err := ParseLabels(pairs)
	return err
}
