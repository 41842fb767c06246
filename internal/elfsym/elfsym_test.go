package elfsym

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// elfFiles are ELF files of this machine to hold the lookups to: Python
// (static and shared), the C library, a large C++ executable.
func elfFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	home, _ := os.UserHomeDir()
	cands := []string{"/usr/bin/python3.11", "/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/node", "/usr/bin/true"}
	libs, _ := filepath.Glob(filepath.Join(home, ".pyenv/versions/*/lib/libpython3.*.so.1.0"))
	for _, p := range append(cands, libs...) {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Skip("no ELF files to read here")
	}
	return out
}

// openWithSymbols opens path and reads all its dynamic symbols, the
// oracle the lookups are held to; the file is closed with the test.
func openWithSymbols(t *testing.T, path string) (*elf.File, []elf.Symbol) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Skipf("no dynamic symbols: %v", err)
	}
	return f, syms
}

// TestHashLookupFindsWhatAScanFinds: every defined dynamic symbol (up to
// a few thousand a file, spread over the table) is found through the
// GNU hash table at the value a scan of the whole table gives, and names
// a file does not export are not found.
func TestHashLookupFindsWhatAScanFinds(t *testing.T) {
	for _, path := range elfFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, syms := openWithSymbols(t, path)
			if f.SectionByType(elf.SHT_GNU_HASH) == nil {
				t.Skip("no GNU hash table")
			}
			defined := map[string]int{}
			for _, s := range syms {
				if s.Section != elf.SHN_UNDEF {
					defined[s.Name]++
				}
			}
			step := max(1, len(syms)/3000)
			checked := 0
			for i := 0; i < len(syms); i += step {
				want := syms[i]
				if want.Section == elf.SHN_UNDEF || want.Name == "" {
					continue
				}
				if defined[want.Name] > 1 {
					// Versions of one name: the default is bound.
					if want.VersionIndex&0x8000 != 0 {
						continue
					}
				}
				got, ok, err := Lookup(f, want.Name)
				if err != nil || !ok || got.Value != want.Value || got.Size != want.Size || got.Info != want.Info {
					t.Fatalf("%s: got %+v, %v, %v; want %+v", want.Name, got, ok, err, want)
				}
				checked++
			}
			for _, absent := range []string{"coldtrace_no_such_symbol", "", "_PyRuntime_", "mallo"} {
				exported := slices.ContainsFunc(syms, func(s elf.Symbol) bool { return s.Name == absent && s.Section != elf.SHN_UNDEF })
				if _, ok, err := Lookup(f, absent); err != nil || ok != exported {
					t.Errorf("%q: found %v (%v), exported %v", absent, ok, err, exported)
				}
			}
			if checked == 0 {
				t.Skip("no defined dynamic symbols")
			}
			t.Logf("%d of %d symbols looked up", checked, len(syms))
		})
	}
}

// TestNeededLibrariesAsDebugELFReadsThem: the DT_NEEDED names read one at
// a time are those debug/elf reads from the whole string table.
func TestNeededLibrariesAsDebugELFReadsThem(t *testing.T) {
	for _, path := range elfFiles(t) {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.ImportedLibraries()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Needed(f)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %q (%v), want %q", path, got, err, want)
		}
		f.Close()
	}
}

// TestImportsAsAScanOfEverySymbol: a name is imported exactly when a
// scan of every dynamic symbol finds it undefined, for every undefined
// name of each file (up to a few thousand), names it only defines, and
// names it lacks.
func TestImportsAsAScanOfEverySymbol(t *testing.T) {
	for _, path := range elfFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, syms := openWithSymbols(t, path)
			undefined, defined := map[string]bool{}, map[string]bool{}
			for _, s := range syms {
				if s.Section == elf.SHN_UNDEF {
					undefined[s.Name] = true
				} else {
					defined[s.Name] = true
				}
			}
			var names []string
			for n := range undefined {
				names = append(names, n)
			}
			checked := 0
			for n := range defined {
				if checked++; checked > 3000 {
					break
				}
				names = append(names, n)
			}
			names = append(names, "coldtrace_no_such_symbol", "getaddrinfo")
			for _, n := range names {
				got, err := Imports(f, n)
				if err != nil || got != undefined[n] {
					t.Fatalf("%q: imported %v (%v), a scan says %v", n, got, err, undefined[n])
				}
			}
			if got, err := Imports(f, "coldtrace_no_such_symbol", "getaddrinfo", "malloc"); err != nil || got != (undefined["getaddrinfo"] || undefined["malloc"]) {
				t.Errorf("three names at once: %v (%v)", got, err)
			}
			t.Logf("%d undefined, %d names asked", len(undefined), len(names))
		})
	}
}

// FuzzReadersOnHostileFiles: a file that parses as ELF but whose hash
// table, symbol entries, string offsets or dynamic section lie never
// makes a reader panic or loop; each answers or errs. Seeds: this
// machine's C library and true(1), and each with bytes flipped.
func FuzzReadersOnHostileFiles(f *testing.F) {
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/true"} {
		if b, err := os.ReadFile(p); err == nil && len(b) < 4<<20 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ef, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			return
		}
		_, _, _ = Lookup(ef, "getaddrinfo")
		_, _, _ = Lookup(ef, "_PyRuntime")
		_, _ = Imports(ef, "getaddrinfo", "getaddrinfo_a")
		_, _ = Needed(ef)
	})
}
