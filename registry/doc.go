// Package registry is what coldtrace knows about frameworks, as data:
// every kernel, JIT and model cache it recognises (layout, locations,
// switches, the source each was read from), how a process's environment
// places each cache and, inversely, which variable places a cache at a
// given root, and which program names are compilers. It loads nothing
// and reads no kernel state, so the sensor that watches the caches, the
// attribution that explains them and `status`, which only looks at them
// on disk, share it without linking BPF code.
package registry
