// Package text renders the terminal summary of a run: the header, the
// breakdown with its evidence, phases, verdict and notes, GPUs, the JIT
// and kernel caches, the page-cache table and the processes. Every string
// that came from the traced program (paths, comm, argv, cache roots) is
// escaped, so a file name cannot drive root's terminal.
package text
