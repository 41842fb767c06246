package pystack

import (
	"bufio"
	"fmt"
	"os/exec"
	"testing"

	"github.com/coldtrace/coldtrace/internal/testenv"
)

// TestDecodeAcceptsOnlyMatchingKey: a live code object decodes to its
// qualname, file and lines when the key the walker read matches it; a
// key differing in its first line, qualname or file address, or in the
// name's length and hash (a freed code object's and name's addresses
// reused by another function) is refused, never decoded as the function
// now there; so is a freed code object whose memory still holds its
// fields.
func TestDecodeAcceptsOnlyMatchingKey(t *testing.T) {
	testenv.RequireRoot(t)
	for _, py := range interpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			// id() of a CPython object is its address.
			src := `
class Engine:
    def startup(self):
        return 1
c = Engine.startup.__code__
def key(c):
    return (id(c), id(c.co_qualname), id(c.co_filename), c.co_firstlineno,
            len(c.co_qualname), hash(c.co_qualname) & 0xffffffffffffffff)
ns = {}
exec("def gone_soon():\n    return 2\n", ns)
freed = key(ns["gone_soon"].__code__)
del ns
import gc; gc.collect()  # the function and its globals hold each other
print(*key(c), *freed, flush=True)
import sys; sys.stdin.read()
`
			cmd := exec.Command(py.path, "-c", src)
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { in.Close(); cmd.Wait() }()
			var key, freed FrameKey
			var length, hash, freedLength, freedHash uint64
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Sscan(line, &key.Code, &key.Qualname, &key.Filename, &key.FirstLineno, &length, &hash,
				&freed.Code, &freed.Qualname, &freed.Filename, &freed.FirstLineno, &freedLength, &freedHash); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			key.NameTag = nameTag(length, hash)
			freed.NameTag = nameTag(freedLength, freedHash)
			interp, err := Locate(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			m, err := openMem(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			defer m.close()
			c, err := decodeCode(m, &interp.Layout, interp.CodeType, key)
			if err != nil {
				t.Fatal(err)
			}
			if c.qualname != "Engine.startup" || c.filename != "<string>" || c.line(c.adaptive+2) != 4 {
				t.Errorf("decoded %q in %q, line %d; want Engine.startup in <string>, line 4", c.qualname, c.filename, c.line(c.adaptive+2))
			}
			for name, k := range map[string]FrameKey{
				"first line": {key.Code, key.Qualname, key.Filename, key.FirstLineno + 1, key.NameTag},
				"qualname":   {key.Code, key.Qualname + 16, key.Filename, key.FirstLineno, key.NameTag},
				"file":       {key.Code, key.Qualname, key.Filename + 16, key.FirstLineno, key.NameTag},
				"name":       {key.Code, key.Qualname, key.Filename, key.FirstLineno, key.NameTag ^ 1},
			} {
				if _, err := decodeCode(m, &interp.Layout, interp.CodeType, k); err == nil {
					t.Errorf("a key with another %s was accepted", name)
				}
			}
			if c, err := decodeCode(m, &interp.Layout, interp.CodeType, freed); err == nil {
				t.Errorf("a freed code object decoded, as %q", c.qualname)
			}
		})
	}
}
