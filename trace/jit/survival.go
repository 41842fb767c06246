package jit

import (
	"fmt"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/residency"
)

// survival says of each cache root whether it outlives a reboot or its
// container, by the rule residency applies to every cache (DESIGN, "Does a
// cache survive?"): its filesystem, then systemd-tmpfiles ageing. The
// root's filesystem is looked up with the command's rights.
func (e *Sensor) survival(caches []record.Cache) {
	rules, err := residency.LoadTmpfiles(residency.DefaultTmpfilesDirs)
	if err != nil {
		e.warnings = append(e.warnings, fmt.Sprintf("jit: %v (cache survival ignores tmpfiles ageing)", err))
	}
	for i := range caches {
		c := &caches[i]
		if c.Root == "" || c.Unreadable {
			continue
		}
		var f residency.FSFacts
		var ferr error
		if err := e.opts.Actor.Do(func() error { f, ferr = residency.RootFacts(c.Root, rules); return nil }); err != nil {
			ferr = err
		}
		if ferr != nil {
			continue // the filesystem was not learnt: say nothing rather than guess
		}
		c.Survival = string(f.Survival)
		if f.Age != nil {
			c.SurvivalAge = fmt.Sprintf("%s (%s)", f.Age.Age, f.Age.Source)
		}
	}
}
