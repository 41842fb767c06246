package record

import (
	"bufio"
	"encoding/json"
	"strconv"
)

// encodeRecord writes r as one JSON object, its samples last and one at
// a time. json.Marshal of the whole record builds all of its text in
// memory first: for a long run's checkpoint, written every minute, that
// was megabytes of buffer each time and, with reflection over every
// delta, most of the CPU coldtrace spent in the steady part of the run.
func encodeRecord(w *bufio.Writer, r *Record) error {
	head := *r
	head.Samples, head.SampleStream = nil, nil
	head.Command, head.CommandB64 = argsJSON(r.Command)
	b, err := json.Marshal(&head)
	if err != nil {
		return err
	}
	// b is an object: its closing brace comes after the samples.
	if _, err := w.Write(b[:len(b)-1]); err != nil {
		return err
	}
	n := len(r.Samples)
	if r.SampleStream != nil {
		n += r.SampleStream.Len()
	}
	if n > 0 {
		w.WriteString(`,"samples":[`)
		buf := make([]byte, 0, 4096)
		first := true
		write := func(s *Sample) error {
			buf = buf[:0]
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendSample(buf, s)
			_, err := w.Write(buf)
			return err
		}
		for i := range r.Samples {
			if err := write(&r.Samples[i]); err != nil {
				return err
			}
		}
		if r.SampleStream != nil {
			if err := r.SampleStream.Each(write); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	}
	_, err = w.WriteString("}\n")
	return err
}

// SampleSource is a timeline read one sample at a time
// (trace/samples.View).
type SampleSource interface {
	// Len is how many samples Each gives.
	Len() int
	// Each calls yield with each sample in time order; the sample is
	// valid only until yield returns. It stops at yield's first error.
	Each(yield func(*Sample) error) error
}

// appendSample appends s as encoding/json writes it (the same keys,
// order and omitempty rules: TestAppendSampleIsMarshal holds them to it).
func appendSample(b []byte, s *Sample) []byte {
	b = append(b, `{"t":`...)
	b = strconv.AppendInt(b, s.EndNS, 10)
	if len(s.Threads) > 0 {
		b = append(b, `,"th":[`...)
		for i := range s.Threads {
			if i > 0 {
				b = append(b, ',')
			}
			t := &s.Threads[i]
			b = append(b, `{"tid":`...)
			b = strconv.AppendInt(b, int64(t.TID), 10)
			b = append(b, `,"pid":`...)
			b = strconv.AppendInt(b, int64(t.PID), 10)
			b = appendInt(b, `,"cpu":`, t.CPUNS)
			b = appendInt(b, `,"io":`, t.IOWaitNS)
			b = appendInt(b, `,"miss":`, t.MissCPUNS)
			b = appendInt(b, `,"rq":`, t.RunQueueNS)
			b = appendInt(b, `,"wait":`, t.OtherWaitNS)
			b = appendInt(b, `,"fwait":`, t.FillWaitNS)
			b = appendInt(b, `,"frq":`, t.FillRunQueueNS)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(s.Files) > 0 {
		b = append(b, `,"f":[`...)
		for i := range s.Files {
			if i > 0 {
				b = append(b, ',')
			}
			f := &s.Files[i]
			b = append(b, `{"id":`...)
			b = strconv.AppendInt(b, int64(f.File), 10)
			b = appendUint(b, `,"acc":`, f.PagesAccessed)
			b = appendUint(b, `,"miss":`, f.PagesMissed)
			b = appendUint(b, `,"evict":`, f.PagesEvicted)
			b = appendInt(b, `,"io":`, f.IOWaitNS)
			b = appendInt(b, `,"mcpu":`, f.MissCPUNS)
			b = appendInt(b, `,"fwait":`, f.FillWaitNS)
			b = appendInt(b, `,"dwait":`, f.DirectWaitNS)
			b = appendUint(b, `,"new":`, f.PagesCreated)
			if len(f.Stacks) > 0 {
				b = append(b, `,"stk":[`...)
				for j, st := range f.Stacks {
					if j > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"n":`...)
					b = strconv.AppendInt(b, int64(st.N), 10)
					b = append(b, `,"ns":`...)
					b = strconv.AppendInt(b, st.NS, 10)
					b = append(b, '}')
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendInt and appendUint write an omitempty field: nothing when zero.
func appendInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), v, 10)
}

func appendUint(b []byte, key string, v uint64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendUint(append(b, key...), v, 10)
}
