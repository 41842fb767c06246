// Package advice turns a record into what the user should change: why a
// cache missed, which caches to persist and how, how each file was read,
// which compiles had no cache, and a short ranked list of next steps.
// Pure: it reads the record and nothing else, and claims nothing the
// record's data does not support. It holds data only (Finding): the
// sentences are report/words'.
package advice

import (
	"cmp"
	"slices"
	"strings"

	"github.com/coldtrace/coldtrace/record"
)

// Advice is everything this package says about one run.
type Advice struct {
	Misses  []CacheMiss      `json:"cache_misses,omitempty"`
	Persist []Persist        `json:"persist,omitempty"`
	Reads   []FileRead       `json:"reads,omitempty"`
	NoCache []NoCacheCompile `json:"no_cache,omitempty"`
	// Late are the compiles after the program was ready.
	Late *LateCompiles `json:"compiles_after_ready,omitempty"`
	// Recurring are files read again on every run (FUSE).
	Recurring []RecurringRead `json:"recurring_reads,omitempty"`
	// SlowFS are files on network or FUSE filesystems filled by many
	// small requests.
	SlowFS []SlowFSRead `json:"slow_fs_reads,omitempty"`
	// Stalls are the stretches in which a download received nothing, or
	// next to nothing.
	Stalls []DownloadStall `json:"download_stalls,omitempty"`
	// Silent are the connections that received nothing for 10 s or more
	// while their process waited.
	Silent []SilentWait `json:"silent_connections,omitempty"`
	// SlowDNS are the downloads whose host name took a second or more to
	// resolve.
	SlowDNS []SlowLookup `json:"slow_dns,omitempty"`
	// Broken are the caches that did not keep what this run compiled.
	Broken []BrokenCache `json:"broken_caches,omitempty"`
	// Candidates are directories under the user's home this run filled
	// that no known cache accounts for: they may be caches.
	Candidates []CacheCandidate `json:"cache_candidates,omitempty"`
	Next       []Action         `json:"advice,omitempty"`
}

// Finding is the shape every finding kind shares: data only (its kind,
// numbers and names), no words. report/words renders its sentence and
// the words of the next step it supports; each kind's Sentence field
// (and an Action's Action and Evidence) stay empty until the renderer
// fills them in for output (words.Fill), so the JSON keeps the rendered
// text beside the fields it was rendered from.
type Finding interface {
	// FindingKind names the kind of finding: one of the Kind constants.
	FindingKind() string
}

// The kinds of finding.
const (
	KindCacheMiss    = "cache_miss"
	KindPersist      = "persist"
	KindFileRead     = "file_read"
	KindNoCache      = "no_cache"
	KindLate         = "compiles_after_ready"
	KindRecurring    = "recurring_read"
	KindSlowFS       = "slow_filesystem"
	KindStall        = "download_stall"
	KindSilent       = "silent_connection"
	KindSlowDNS      = "slow_dns"
	KindBroken       = "broken_cache"
	KindCandidate    = "cache_candidate"
	KindCacheChange  = "cache_change"
	KindCacheNotUsed = "cache_not_used"
)

// Action is one next step: what to do, the seconds it would save on the
// next cold run, and the evidence from this run.
type Action struct {
	// Kind types a finding that is not a saving of its own
	// ("cache_candidate"); empty for the others.
	Kind string `json:"kind,omitempty"`
	// Action and Evidence are the step's words, rendered from Finding
	// by report/words; empty until then.
	Action   string `json:"action"`
	SavesNS  int64  `json:"saves_ns"`
	Evidence string `json:"evidence"`
	// Finding is what the step rests on.
	Finding Finding `json:"-"`
}

// MaxActions is how many next steps a report lists.
const MaxActions = 5

// Of computes the advice for one record.
func Of(r *record.Record, baseline *record.Record) Advice {
	var a Advice
	a.Misses = MissesWith(r, baseline)
	a.Persist = PersistList(r)
	a.Reads = Reads(r, baseline)
	a.NoCache = NoCache(r)
	a.Late = AfterReady(r)
	a.Recurring = Recurring(r)
	a.SlowFS = SlowFS(r)
	a.Stalls = Stalls(r)
	a.Silent = SilentWaits(r)
	a.SlowDNS = SlowLookups(r)
	a.Broken = BrokenCaches(r)
	a.Candidates = MayBeCaches(r)
	a.Next = nextSteps(a)
	return a
}

// nextSteps ranks the actions the findings support, largest saving
// first, at most MaxActions.
func nextSteps(a Advice) []Action {
	var out []Action
	for _, m := range a.Misses {
		if m.Action != nil {
			out = append(out, *m.Action)
		}
	}
	for _, p := range a.Persist {
		if p.Action != nil {
			out = append(out, *p.Action)
		}
	}
	for _, f := range a.Reads {
		if f.Action != nil {
			out = append(out, *f.Action)
		}
	}
	for _, n := range a.NoCache {
		if n.Action != nil {
			out = append(out, *n.Action)
		}
	}
	if a.Late != nil && a.Late.Action != nil {
		out = append(out, *a.Late.Action)
	}
	for _, s := range a.SlowFS {
		if s.Action != nil {
			out = append(out, *s.Action)
		}
	}
	for _, s := range a.Stalls {
		if s.Action != nil {
			out = append(out, *s.Action)
		}
	}
	for _, s := range a.Silent {
		out = append(out, *s.Action)
	}
	for _, s := range a.SlowDNS {
		out = append(out, *s.Action)
	}
	for _, b := range a.Broken {
		out = append(out, *b.Action)
	}
	for _, c := range a.Candidates {
		out = append(out, c.Action())
	}
	slices.SortStableFunc(out, func(x, y Action) int { return cmp.Compare(y.SavesNS, x.SavesNS) })
	if len(out) > MaxActions {
		out = out[:MaxActions]
	}
	return out
}

// Trap is one finding the verdict may name: what happened, and the
// seconds it cost this run.
type Trap struct {
	Kind   string `json:"kind"`
	CostNS int64  `json:"cost_ns"`
	// Finding is the finding itself: report/words says it.
	Finding Finding `json:"-"`
}

// MaxVerdictTraps is how many findings the verdict names.
const MaxVerdictTraps = 2

// Traps are the findings of a, costliest first; the verdict names the
// first MaxVerdictTraps.
func Traps(a Advice) []Trap {
	var out []Trap
	if a.Late != nil {
		out = append(out, Trap{Kind: KindLate, CostNS: a.Late.CompileNS, Finding: *a.Late})
	}
	for _, s := range a.SlowFS {
		out = append(out, Trap{Kind: KindSlowFS, CostNS: s.CostNS, Finding: s})
	}
	for _, s := range a.Stalls {
		out = append(out, Trap{Kind: KindStall, CostNS: s.LengthNS, Finding: s})
	}
	for _, s := range a.Silent {
		out = append(out, Trap{Kind: KindSilent, CostNS: s.LengthNS, Finding: s})
	}
	for _, s := range a.SlowDNS {
		out = append(out, Trap{Kind: KindSlowDNS, CostNS: s.LengthNS, Finding: s})
	}
	for _, b := range a.Broken {
		// It costs the next run: the compiles it does again.
		out = append(out, Trap{Kind: KindBroken, CostNS: b.CompileNS, Finding: b})
	}
	for _, rr := range a.Recurring {
		out = append(out, Trap{Kind: KindRecurring, CostNS: rr.FillNS, Finding: rr})
	}
	for _, m := range a.Misses {
		// A cache that was there but not used: its compiles are the cost.
		if (m.Reason == MovedRoot || m.Reason == KeyChanged) && m.Action != nil {
			out = append(out, Trap{Kind: KindCacheNotUsed, CostNS: m.Action.SavesNS, Finding: m})
		}
	}
	slices.SortStableFunc(out, func(x, y Trap) int { return cmp.Compare(y.CostNS, x.CostNS) })
	return out
}

// keyHint says what a framework puts in its cache key, so that a key
// change can be traced to its cause.
func keyHint(framework string) string {
	switch {
	case strings.HasPrefix(framework, "Numba"):
		return "the source file's modification time or size, the Numba or Python version, or the CPU"
	case strings.HasPrefix(framework, "Triton"):
		return "a different Triton/torch version, GPU, path or host in the key"
	case strings.HasPrefix(framework, "PyTorch Inductor"):
		return "a different torch version, GPU, graph or config in the key"
	case strings.HasPrefix(framework, "Python"):
		return "the source file's modification time or size"
	}
	return "a different version, device, path or host in the key"
}
