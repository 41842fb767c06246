package attribution

// Category is one row of the breakdown. Its string is the stable name used
// in JSON and in the record's consumers.
type Category string

// The six categories. Their order in [Categories] is the order of the
// breakdown rows and, for the overlap rule, the priority order (first wins)
// except that other_wait takes what is left.
const (
	DiskRead   Category = "disk_read"
	JITCompile Category = "jit_compile"
	GPUCompute Category = "gpu_compute"
	Download   Category = "download"
	CPU        Category = "cpu"
	OtherWait  Category = "other_wait"
)

// Categories lists every category in breakdown order.
var Categories = [numCategories]Category{DiskRead, JITCompile, GPUCompute, Download, CPU, OtherWait}

const numCategories = 6

// Indexes into a split; the same order as Categories.
const (
	iDisk = iota
	iJIT
	iGPU
	iDownload
	iCPU
	iOther
)

// priority is the order in which the overlap rule hands out a slice's wall
// time: disk_read > jit_compile > download > gpu_compute > cpu, then
// other_wait takes the rest.
var priority = [...]int{iDisk, iJIT, iDownload, iGPU, iCPU}

// tieOrder breaks ties between equal categories: priority order, then
// other_wait.
var tieOrder = [...]int{iDisk, iJIT, iDownload, iGPU, iCPU, iOther}

// Label is the category's name for people ("disk reads", "JIT compile").
func (c Category) Label() string {
	switch c {
	case DiskRead:
		return "disk reads"
	case JITCompile:
		return "JIT compile"
	case GPUCompute:
		return "GPU compute"
	case Download:
		return "downloads"
	case CPU:
		return "CPU"
	case OtherWait:
		return "other wait"
	}
	return string(c)
}

// PhaseName is the name of a phase dominated by c: "load", "compile",
// "compute" (GPU), "download", "cpu" or "idle".
func (c Category) PhaseName() string {
	switch c {
	case DiskRead:
		return "load"
	case JITCompile:
		return "compile"
	case GPUCompute:
		return "compute"
	case Download:
		return "download"
	case CPU:
		return "cpu"
	case OtherWait:
		return "idle"
	}
	return string(c)
}

// Avoidable reports whether a warm rerun (page cache, kernel caches and
// model caches filled) would not pay this category again.
func (c Category) Avoidable() bool {
	return c == DiskRead || c == JITCompile || c == Download
}

// Split is wall time by category, in [Categories] order.
type Split [numCategories]int64

// Total is the sum of the split.
func (s Split) Total() int64 {
	var t int64
	for _, v := range s {
		t += v
	}
	return t
}

// Get returns the time of category c.
func (s Split) Get(c Category) int64 {
	for i, k := range Categories {
		if k == c {
			return s[i]
		}
	}
	return 0
}

// dominant is the index of the largest entry; ties go to the earlier
// category in priority order, other_wait last.
func (s Split) dominant() int {
	best := tieOrder[0]
	for _, i := range tieOrder[1:] {
		if s[i] > s[best] {
			best = i
		}
	}
	return best
}

// Share is one category's part of a whole.
type Share struct {
	Category Category `json:"category"`
	NS       int64    `json:"ns"`
	Share    float64  `json:"share"`
}

// shares lists s in category order with each entry's share of total.
func (s Split) shares() []Share {
	total := s.Total()
	out := make([]Share, numCategories)
	for i, c := range Categories {
		out[i] = Share{Category: c, NS: s[i]}
		if total > 0 {
			out[i].Share = float64(s[i]) / float64(total)
		}
	}
	return out
}
