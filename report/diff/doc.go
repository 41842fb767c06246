// Package diff renders a comparison of two runs (attribution/compare) for
// people, as text, and for scripts, as JSON (schema coldtrace.diff/v1).
// Both say the verdict with report/words; the text escapes every string
// that came from a traced program.
package diff
