package advice

import (
	"cmp"
	"path/filepath"

	"github.com/coldtrace/coldtrace/record"
)

// SilentWait is a connection that received nothing for
// record.SilentMinNS while its process waited on it: a server (or a
// proxy before it) that accepted and did not answer.
type SilentWait struct {
	Host     string `json:"host"`
	PID      int32  `json:"pid"`
	StartNS  int64  `json:"start_ns"`
	LengthNS int64  `json:"length_ns"`
	Received bool   `json:"received,omitempty"`
	// Closed is set when the connection closed with nothing received;
	// Bytes are what arrived after the wait, when something did.
	Closed bool   `json:"-"`
	Bytes  uint64 `json:"-"`
	// Sentence is filled in by report/words.
	Sentence string  `json:"sentence"`
	Action   *Action `json:"-"`
}

// maxSilent bounds the silent connections named.
const maxSilent = 10

// SilentWaits names r's silent connections, longest first (the record
// keeps them in that order).
func SilentWaits(r *record.Record) []SilentWait {
	var out []SilentWait
	for _, c := range r.Silent[:min(len(r.Silent), maxSilent)] {
		host := cmp.Or(c.Host, c.Peer)
		w := SilentWait{Host: host, PID: c.PID, StartNS: c.StartNS, LengthNS: c.LengthNS, Received: c.Received,
			Closed: c.Closed, Bytes: c.Bytes}
		w.Action = &Action{SavesNS: c.LengthNS, Finding: w}
		out = append(out, w)
	}
	return out
}

// SlowLookupNS is how long a name lookup before a download takes to be
// named. A resolver answers from its cache in under a millisecond and
// from a remote server in tens of milliseconds; glibc waits 5 s for a
// lost answer before it retries. A second is ten times a slow answer,
// so a lookup that long met a slow or unreachable server, or a retry.
const SlowLookupNS = 1e9

// SlowLookup is a download whose host name took SlowLookupNS or more to
// resolve before its connect.
type SlowLookup struct {
	Host     string `json:"host"`
	Download string `json:"download,omitempty"`
	StartNS  int64  `json:"start_ns"`
	LengthNS int64  `json:"length_ns"`
	// Sentence is filled in by report/words.
	Sentence string  `json:"sentence"`
	Action   *Action `json:"-"`
}

// SlowLookups finds the downloads whose name lookup was slow, in the
// order they started; a lookup shared by several downloads is named once.
func SlowLookups(r *record.Record) []SlowLookup {
	var out []SlowLookup
	seen := map[record.Lookup]bool{}
	for _, d := range r.Downloads {
		l := d.Lookup
		if l == nil || l.LengthNS < SlowLookupNS || seen[*l] {
			continue
		}
		seen[*l] = true
		name := d.Name
		if name == "" && d.Path != "" {
			name = filepath.Base(d.Path)
		}
		s := SlowLookup{Host: l.Host, Download: name, StartNS: l.StartNS, LengthNS: l.LengthNS}
		s.Action = &Action{SavesNS: l.LengthNS, Finding: s}
		out = append(out, s)
	}
	return out
}
