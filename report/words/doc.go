// Package words says in sentences what attribution and attribution/compare
// return as data: the verdict of a run ("cold start: 33% disk reads
// (model.bin not in page cache); a warm rerun should take ~2.3s."), its
// notes, and the verdict of a comparison of two runs. Text and JSON
// renderers share these sentences, so both say the same thing. The
// sentences are not escaped: a text renderer escapes them for the
// terminal (format.Escape), a JSON encoder for JSON.
package words
