// Package target finds what coldtrace attach traces: the processes named
// by pid or living in a cgroup, their threads, names and mount
// namespaces, read from /proc and the cgroup file system.
package target
