package probe

import (
	"bytes"
	"structs"
	"testing"

	"github.com/cilium/ebpf/btf"
)

func TestCheckLayout(t *testing.T) {
	i32 := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	u64 := &btf.Int{Name: "u64", Size: 8}
	st := &btf.Struct{Name: "rec", Size: 16, Members: []btf.Member{
		{Name: "a", Type: i32, Offset: 0},
		{Name: "b", Type: u64, Offset: 64},
	}}
	b, err := btf.NewBuilder([]btf.Type{st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := btf.LoadSpecFromReader(bytesReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	type good struct {
		_ structs.HostLayout
		A int32
		_ [4]byte
		B uint64
	}
	if err := CheckLayout(spec, "rec", good{}); err != nil {
		t.Errorf("matching struct: %v", err)
	}
	type swapped struct {
		B uint64
		A int32
		_ [4]byte
	}
	if err := CheckLayout(spec, "rec", swapped{}); err == nil {
		t.Errorf("fields in the wrong order accepted")
	}
	type short struct {
		A int32
		B int32
	}
	if err := CheckLayout(spec, "rec", short{}); err == nil {
		t.Errorf("wrong size accepted")
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
