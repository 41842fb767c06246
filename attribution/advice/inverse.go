package advice

import (
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
)

// keepAt returns the variable and value that make cache c's framework
// find its cache at root, from the registry's inverse of its resolution:
// a torch.hub cache at /x/hub is TORCH_HOME=/x, because torch looks in
// $TORCH_HOME/hub. It reports false for a cache named by --cache-dir
// (the program was told its root some other way), one the registry does
// not know, and a root no variable of its framework can produce.
func keepAt(c record.Cache, root string) (registry.Assignment, bool) {
	if c.MovedBy == "" || c.Via == "--cache-dir" {
		return registry.Assignment{}, false
	}
	s, ok := registry.Lookup(c.Name)
	if !ok {
		return registry.Assignment{}, false
	}
	return s.ExportFor(root)
}
