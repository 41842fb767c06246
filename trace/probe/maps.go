package probe

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/cilium/ebpf"
)

// BatchSize is how many map entries one lookup syscall returns; larger
// than a hash bucket can ever hold, so the kernel never answers ENOSPC.
const BatchSize = 4096

// ReadMap calls fn for every entry of m. It reads in batches, one syscall
// per len(keys) entries: polling 20,000 files entry by entry costs more
// CPU than the workload being traced. Kernels without batch lookups fall
// back to iteration.
func ReadMap[K, V any](m *ebpf.Map, keys []K, vals []V, fn func(K, *V)) error {
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			fn(keys[i], &vals[i])
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			var k K
			var v V
			it := m.Iterate()
			for it.Next(&k, &v) {
				fn(k, &v)
			}
			return it.Err()
		case err != nil:
			return err
		}
	}
}

// ReadArray calls fn for entries [0, n) of the array m, in batches.
func ReadArray[V any](m *ebpf.Map, n int, keys []uint32, vals []V, fn func(uint32, *V)) error {
	var cursor ebpf.MapBatchCursor
	for done := 0; done < n; {
		k := min(len(keys), n-done)
		got, err := m.BatchLookup(&cursor, keys[:k], vals[:k], nil)
		for i := 0; i < got; i++ {
			fn(keys[i], &vals[i])
		}
		done += got
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			for i := uint32(done); i < uint32(n); i++ {
				if err := m.Lookup(i, &vals[0]); err != nil {
					return err
				}
				fn(i, &vals[0])
			}
			return nil
		case err != nil:
			return err
		case got == 0:
			return nil
		}
	}
	return nil
}

// SumPerCPU is the sum over CPUs of entry key of the per-CPU array m.
func SumPerCPU(m *ebpf.Map, key uint32) (uint64, error) {
	var per []uint64
	if err := m.Lookup(key, &per); err != nil {
		return 0, fmt.Errorf("read %s[%d]: %w", m, key, err)
	}
	var s uint64
	for _, v := range per {
		s += v
	}
	return s, nil
}

// Lost reads the lost counters of one BPF object (the per-CPU array
// "lost" every object has, indexed by its generated lost_kind) for the
// given kinds.
func Lost[K ~uint32](m *ebpf.Map, kinds ...K) (map[K]uint64, error) {
	out := make(map[K]uint64, len(kinds))
	for _, k := range kinds {
		n, err := SumPerCPU(m, uint32(k))
		if err != nil {
			return nil, fmt.Errorf("read lost counters: %w", err)
		}
		out[k] = n
	}
	return out, nil
}

// LoadError words a failed load of a BPF object: the verifier's log whole,
// or what the kernel lacks.
func LoadError(what string, err error) error {
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		return fmt.Errorf("load %s (verifier rejected them): %+v", what, verr)
	}
	if errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("load %s: the kernel lacks something coldtrace needs (Linux 6.18 or later, for the BPF task-work kfuncs): %w", what, err)
	}
	return fmt.Errorf("load %s: %w", what, err)
}

// MapsByName are the maps of a loaded objects struct (bpf2go's
// XxxMaps, or any struct of *ebpf.Map fields tagged `ebpf:"name"`,
// embedded structs included) by their names, for the MapReplacements of
// a later load of the same object's programs on those maps: an object
// loaded in parts (its maps first, so that others can take them) must not
// make a second copy of any map, which a map added to the object later
// would otherwise become.
func MapsByName(objs any) map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	collectMaps(reflect.ValueOf(objs), out)
	return out
}

func collectMaps(v reflect.Value, out map[string]*ebpf.Map) {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			collectMaps(fv, out)
			continue
		}
		name, ok := f.Tag.Lookup("ebpf")
		if m, isMap := fv.Interface().(*ebpf.Map); ok && isMap && m != nil {
			out[name] = m
		}
	}
}
