package probe

import (
	"fmt"
	"reflect"

	"github.com/cilium/ebpf/btf"
)

// CheckLayout compares the Go struct of v with the C struct named name in
// spec (the BTF of the embedded object): the same size, and the same
// offset and size for each field, in order. Go's blank fields (bpf2go's
// structs.HostLayout marker and explicit padding) are skipped. It holds
// a Go type that mirrors a BPF one to the object it is read from, as
// tetragon's alignchecker does.
func CheckLayout(spec *btf.Spec, name string, v any) error {
	var st *btf.Struct
	if err := spec.TypeByName(name, &st); err != nil {
		return fmt.Errorf("struct %s: %w", name, err)
	}
	gt := reflect.TypeOf(v)
	if gt.Kind() != reflect.Struct {
		return fmt.Errorf("%s: %v is not a struct", name, gt)
	}
	if uintptr(st.Size) != gt.Size() {
		return fmt.Errorf("struct %s: %d bytes in BTF, %v has %d", name, st.Size, gt, gt.Size())
	}
	var fields []reflect.StructField
	for i := 0; i < gt.NumField(); i++ {
		if f := gt.Field(i); f.Name != "_" {
			fields = append(fields, f)
		}
	}
	var members []btf.Member
	for _, m := range st.Members {
		if m.Name != "" || m.BitfieldSize != 0 {
			members = append(members, m)
		}
	}
	if len(fields) != len(members) {
		return fmt.Errorf("struct %s: %d members in BTF, %v has %d fields", name, len(members), gt, len(fields))
	}
	for i, m := range members {
		f := fields[i]
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			return fmt.Errorf("struct %s member %s: %w", name, m.Name, err)
		}
		if uintptr(m.Offset.Bytes()) != f.Offset || uintptr(size) != f.Type.Size() {
			return fmt.Errorf("struct %s member %s: offset %d size %d in BTF, %v.%s offset %d size %d",
				name, m.Name, m.Offset.Bytes(), size, gt, f.Name, f.Offset, f.Type.Size())
		}
	}
	return nil
}
