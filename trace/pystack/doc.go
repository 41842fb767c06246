// Package pystack finds the CPython interpreter of a traced process and
// turns the stacks the BPF walker (bpf/pystack) takes into file, line and
// function names: which line of the user's program forked the compiler.
//
// A process is located at its exec: its executable or libpython must
// export _PyRuntime and Py_Version, and its minor must be one whose layout
// is known — 3.11 and 3.12 from offset tables derived from CPython's
// internal headers, 3.13 and 3.14 from the _Py_DebugOffsets the
// interpreter carries at the head of _PyRuntime, each read with its own
// minor's layout of that struct. Any other minor, or a free-threaded
// build, is not walked (never a guessed layout): its forks, like those of
// programs that are not Python, carry their leaf native frame (native.go). ELF files are read through
// /proc/PID/map_files, never by a host path, and with bounded sizes.
package pystack
