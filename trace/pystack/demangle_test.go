package pystack

import (
	"strings"
	"testing"
)

// TestNativeNamesAreDemangled: C++ and Rust linkage names come out as
// their functions' qualified names, without parameters or template
// arguments, the linkage name kept beside; C names, names that do not
// demangle and overlong names stay as the file gives them.
func TestNativeNamesAreDemangled(t *testing.T) {
	long := "_ZN" + strings.Repeat("3abc", maxMangled/4) + "Ev"
	for _, c := range []struct{ sym, name, linkage string }{
		{"vfork", "vfork", ""},
		{"__libc_read", "__libc_read", ""},
		{"_Z28make_pass_build_cgraph_edgesPN3gcc7contextE", "make_pass_build_cgraph_edges", "_Z28make_pass_build_cgraph_edgesPN3gcc7contextE"},
		{"_ZN6loader5spawnILi3EEElv", "loader::spawn", "_ZN6loader5spawnILi3EEElv"},
		{"_ZNK2at10TensorBase5numelEv", "at::TensorBase::numel", "_ZNK2at10TensorBase5numelEv"},
		{"_RNvCs15kBYyAo9fc_7mycrate7example", "mycrate::example", "_RNvCs15kBYyAo9fc_7mycrate7example"},
		{"_Zgarbage", "_Zgarbage", ""},
		{"_Reserved", "_Reserved", ""},
		{long, long, ""},
	} {
		name, linkage := nativeName(c.sym)
		if name != c.name || linkage != c.linkage {
			t.Errorf("nativeName(%.40q) = %.60q, %.40q; want %.60q, %.40q", c.sym, name, linkage, c.name, c.linkage)
		}
	}
}

// FuzzNativeName: a symbol name is the ELF file's own text, hostile or
// not: naming never panics, a name comes back unchanged unless it
// demangled, and a demangled name keeps the symbol as its linkage name.
func FuzzNativeName(f *testing.F) {
	for _, s := range []string{"vfork", "_ZN6loader5spawnILi3EEElv", "_RNvCs15kBYyAo9fc_7mycrate7example",
		"_ZN3std2rt10lang_start17h0123456789abcdefE", "_Z1fIJEEvv", "_ZZ", "_R"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sym string) {
		name, linkage := nativeName(sym)
		if linkage == "" && name != sym || linkage != "" && (linkage != sym || name == "" || name == sym) {
			t.Errorf("nativeName(%q) = %q, %q", sym, name, linkage)
		}
	})
}
