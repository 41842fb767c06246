package record

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
)

// randomSample fills every numeric field of its deltas at random, zero
// (omitted) a third of the time, negative now and then.
func randomSample(rng *rand.Rand) Sample {
	val := func() int64 {
		switch rng.Intn(3) {
		case 0:
			return 0
		case 1:
			return -rng.Int63n(1000)
		}
		return rng.Int63()
	}
	fill := func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.Int, reflect.Int32, reflect.Int64:
				x := val()
				if f.OverflowInt(x) {
					x = int64(int32(x))
				}
				f.SetInt(x)
			case reflect.Uint32, reflect.Uint64:
				x := val()
				if x < 0 {
					x = -x
				}
				f.SetUint(uint64(x))
			}
		}
	}
	s := Sample{EndNS: val()}
	for range rng.Intn(4) {
		var td ThreadDelta
		fill(reflect.ValueOf(&td).Elem())
		s.Threads = append(s.Threads, td)
	}
	for range rng.Intn(4) {
		var fd FileDelta
		fill(reflect.ValueOf(&fd).Elem())
		for range rng.Intn(3) {
			fd.Stacks = append(fd.Stacks, SampleStack{N: int(rng.Int31()), NS: val()})
		}
		s.Files = append(s.Files, fd)
	}
	return s
}

// The hand-written sample encoder writes what encoding/json would, byte
// for byte: a field added to Sample, ThreadDelta or FileDelta and not to
// appendSample fails here.
func TestAppendSampleIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := range 2000 {
		s := randomSample(rng)
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSample(nil, &s); !bytes.Equal(got, want) {
			t.Fatalf("sample %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// A record written by Encode reads back equal, samples included, and
// one without samples too.
func TestEncodeStreamsSamples(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	r := &Record{Schema: Schema, Version: "test", Command: []string{"true"}, WallNS: 5}
	for range 300 {
		r.Samples = append(r.Samples, randomSample(rng))
	}
	for _, rec := range []*Record{r, {Schema: Schema, Version: "test", Command: []string{"true"}}} {
		var b bytes.Buffer
		if err := Encode(&b, rec); err != nil {
			t.Fatal(err)
		}
		got, err := Decode(&b)
		if err != nil {
			t.Fatal(err)
		}
		want := *rec
		want.Schema = got.Schema
		if !reflect.DeepEqual(got.Samples, want.Samples) || got.WallNS != want.WallNS || !reflect.DeepEqual(got.Command, want.Command) {
			t.Errorf("decoded %d samples, wall %d; want %d, %d", len(got.Samples), got.WallNS, len(want.Samples), want.WallNS)
		}
	}
}
