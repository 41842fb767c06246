package record

// MadeCold says that coldtrace made the run cold on purpose (`run
// --cold`), and how: which files it dropped from the page cache before
// the command started, and which caches it pointed at fresh, empty
// directories through the command's environment. The user's own caches
// were not touched, so a run after it finds them as they were.
type MadeCold struct {
	// Classes are the kinds of cache made cold: "page-cache", "jit",
	// "pycache", "downloads".
	Classes []string `json:"classes"`
	// EvictedFiles and EvictedBytes are the files dropped from the page
	// cache and the cached bytes that went (as cachestat saw them).
	EvictedFiles int   `json:"evicted_files"`
	EvictedBytes int64 `json:"evicted_bytes"`
	// KeptBytes stayed cached: dirty, under writeback or mapped by a
	// running process. UnverifiedFiles were asked to go but the kernel
	// would not say how much went (cachestat refused this user).
	KeptBytes       int64 `json:"kept_bytes,omitempty"`
	UnverifiedFiles int   `json:"unverified_files,omitempty"`
	// EvictProblems are the files that could not be evicted, one line
	// each ("PATH: why").
	EvictProblems []string `json:"evict_problems,omitempty"`
	// CacheDirs are the caches moved to fresh directories; Untouched
	// those of the chosen classes that no variable moves, or that were
	// off anyway.
	CacheDirs []ColdCacheDir  `json:"cache_dirs,omitempty"`
	Untouched []ColdUntouched `json:"untouched,omitempty"`
	// KeptDirs is set when the fresh directories were left in place
	// (--keep-cold-caches, or removing them failed); otherwise they were
	// removed after the run.
	KeptDirs bool `json:"kept_dirs,omitempty"`
}

// ColdCacheDir is one cache pointed at a fresh directory: Env was set to
// Dir in the command's environment.
type ColdCacheDir struct {
	Cache string `json:"cache"`
	Env   string `json:"env"`
	Dir   string `json:"dir"`
}

// ColdUntouched is a cache of a chosen class left as it was, and why.
type ColdUntouched struct {
	Cache  string `json:"cache"`
	Reason string `json:"reason"`
}

// HasClass reports whether class was made cold.
func (m *MadeCold) HasClass(class string) bool {
	if m == nil {
		return false
	}
	for _, c := range m.Classes {
		if c == class {
			return true
		}
	}
	return false
}
