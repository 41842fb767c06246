package words

import (
	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/attribution/compare"
)

// Finding renders the sentence of one finding of attribution/advice:
// what happened, with the numbers that show it.
func Finding(f advice.Finding) string {
	switch f := f.(type) {
	case advice.Persist:
		return persistSentence(f)
	case advice.SilentWait:
		return silentSentence(f)
	case advice.SlowLookup:
		return slowLookupSentence(f)
	case advice.DownloadStall:
		return stallSentence(f)
	case advice.BrokenCache:
		return brokenSentence(f)
	case advice.SlowFSRead:
		return slowFSSentence(f)
	case advice.RecurringRead:
		return recurringSentence(f)
	case advice.LateCompiles:
		return lateSentence(f)
	case advice.NoCacheCompile:
		return noCacheSentence(f)
	case advice.CacheCandidate:
		return candidateSentence(f)
	case advice.FileRead:
		return readSentence(f)
	case advice.CacheMiss:
		return missSentence(f)
	case advice.CacheChange:
		return changeSentence(f)
	}
	return ""
}

// Step renders a next step: what to do, and the evidence from this run.
func Step(a advice.Action) (action, evidence string) {
	switch f := a.Finding.(type) {
	case advice.SilentWait:
		return silentAction(f), Finding(f)
	case advice.SlowLookup:
		return slowLookupAction(f), Finding(f)
	case advice.DownloadStall:
		return stallAction(f), Finding(f)
	case advice.BrokenCache:
		return brokenAction(f), Finding(f)
	case advice.SlowFSRead:
		return slowFSAction(f)
	case advice.LateCompiles:
		return lateAction, Finding(f)
	case advice.NoCacheCompile:
		return f.Enable, Finding(f)
	case advice.CacheCandidate:
		return candidateAction(f), Finding(f)
	case advice.FileRead:
		return f.Path + ": " + readFix(f), Finding(f)
	case advice.Persist:
		return persistAction(f), Finding(f)
	case advice.CacheMiss:
		return missAction(f), Finding(f)
	}
	// A step with no finding keeps the words it was given.
	return a.Action, a.Evidence
}

// Fill renders, in place, every sentence of a and the words of its next
// steps: attribution/advice returns data, and the outputs (the text
// report, the JSON summary) carry its words beside that data.
func Fill(a *advice.Advice) {
	fillAll(a.Misses)
	fillAll(a.Reads)
	fillAll(a.NoCache)
	if a.Late != nil {
		a.Late.Sentence = Finding(*a.Late)
	}
	fillAll(a.Recurring)
	fillAll(a.SlowFS)
	fillAll(a.Stalls)
	fillAll(a.Silent)
	fillAll(a.SlowDNS)
	fillAll(a.Broken)
	fillAll(a.Candidates)
	for i := range a.Next {
		a.Next[i].Action, a.Next[i].Evidence = Step(a.Next[i])
	}
}

// FillDiff renders, in place, the sentences of the findings a diff
// carries for its two runs.
func FillDiff(d *compare.Diff) {
	fillAll(d.CacheChanges)
	fillAll(d.CacheCandidates)
	for _, l := range []*advice.LateCompiles{d.LateA, d.LateB} {
		if l != nil {
			l.Sentence = Finding(*l)
		}
	}
	fillAll(d.StallsA)
	fillAll(d.StallsB)
	fillAll(d.SilentA)
	fillAll(d.SilentB)
	fillAll(d.SlowDNSA)
	fillAll(d.SlowDNSB)
	fillAll(d.BrokenA)
	fillAll(d.BrokenB)
}

// sentenced is a finding kind whose Sentence field the renderer fills.
type sentenced interface {
	advice.CacheMiss | advice.FileRead | advice.NoCacheCompile | advice.RecurringRead | advice.SlowFSRead |
		advice.DownloadStall | advice.SilentWait | advice.SlowLookup | advice.BrokenCache | advice.CacheCandidate |
		advice.CacheChange
	advice.Finding
}

// fillAll fills the Sentence of each finding of fs.
func fillAll[F sentenced](fs []F) {
	for i := range fs {
		setSentence(&fs[i], Finding(fs[i]))
	}
}

// setSentence sets the Sentence field of a finding.
func setSentence[F sentenced](f *F, s string) {
	switch f := any(f).(type) {
	case *advice.CacheMiss:
		f.Sentence = s
	case *advice.FileRead:
		f.Sentence = s
	case *advice.NoCacheCompile:
		f.Sentence = s
	case *advice.RecurringRead:
		f.Sentence = s
	case *advice.SlowFSRead:
		f.Sentence = s
	case *advice.DownloadStall:
		f.Sentence = s
	case *advice.SilentWait:
		f.Sentence = s
	case *advice.SlowLookup:
		f.Sentence = s
	case *advice.BrokenCache:
		f.Sentence = s
	case *advice.CacheCandidate:
		f.Sentence = s
	case *advice.CacheChange:
		f.Sentence = s
	}
}
