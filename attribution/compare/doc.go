// Package compare computes the difference between two runs as data: A
// (typically the cold run) and B, their walls and breakdowns side by side,
// files matched by path, caches by name, compilers by kind and name, GPUs
// by index, downloads by path, warnings when the runs are not comparable,
// and a verdict that says which categories made B faster or slower, with
// the evidence behind each. report/diff renders it; report/words says the
// verdict. Like attribution, it is pure Go and deterministic.
package compare
