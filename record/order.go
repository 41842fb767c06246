package record

// ReadOrder is how a file's page-cache misses came, in the order they
// came: a summary the kernel keeps per file (bpf/pagecache), never the
// list of offsets. A miss is one insertion of a folio (1 to 512 pages).
// Jumps are from the page after the previous miss of the file to the
// first page of this one: Jumps[0] counts misses that start exactly
// there (sequential), [1] forward up to 32 pages (128 KiB), [2] forward
// up to 2,048 pages (8 MiB), [3] further forward, [4] backward.
// SameStride counts misses whose jump equals the previous miss's jump,
// not zero (a strided walk).
type ReadOrder struct {
	Misses     uint64    `json:"misses"`
	FaultPages uint64    `json:"fault_pages"`
	ReadPages  uint64    `json:"read_pages"`
	Jumps      [5]uint64 `json:"jumps"`
	SameStride uint64    `json:"same_stride"`
	// FS names the file's filesystem ("ext4", "nfs4").
	FS string `json:"fs,omitempty"`
}

// Order is the pattern the jumps show: "sequential", "strided", "random",
// or "" with fewer than 8 misses to judge by.
func (o *ReadOrder) Order() string {
	if o == nil || o.Misses < 8 {
		return ""
	}
	n := o.Misses - 1
	switch {
	case o.Jumps[0]*10 >= n*7:
		return "sequential"
	case o.SameStride*10 >= n*7:
		return "strided"
	}
	return "random"
}
