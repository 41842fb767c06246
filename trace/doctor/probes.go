package doctor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"

	"github.com/coldtrace/coldtrace/trace"
	"github.com/coldtrace/coldtrace/trace/jit"
)

// object is one sensor's BPF object and what a report lacks without it.
type object struct {
	sensor string
	load   func() (*ebpf.CollectionSpec, error)
	lacks  string
	// pathSyscalls: the object's syscalls:* programs attach to
	// jit.PathSyscalls, not to the one their section names.
	pathSyscalls bool
	// optional: a run goes on without the sensor (a note, not a failure).
	optional bool
}

// objects are the BPF objects of the session's table of sensors
// (trace.Sensors), in its order.
func objects() []object {
	var out []object
	for _, row := range trace.Sensors() {
		if row.Object == nil {
			continue
		}
		out = append(out, object{sensor: row.Name, load: row.Object, lacks: row.Lacks,
			pathSyscalls: row.PathSyscalls, optional: row.Optional})
	}
	return out
}

// target is one attachment a sensor makes.
type target struct {
	kind  string // "tp_btf" or "tracepoint"
	group string // classic tracepoints only
	name  string
	prog  string
	// optional targets only leave some calls unseen; lacks says which
	// (kernel-cache lookups when empty).
	optional bool
	lacks    string
}

func (t target) String() string {
	if t.group != "" {
		return fmt.Sprintf("%s %s:%s", t.kind, t.group, t.name)
	}
	return t.kind + " " + t.name
}

// hiddenName is what a hidden tracepoint is renamed to: no kernel has it.
func hiddenName(name string) string { return name + "__hidden_by_coldtrace_doctor" }

// checkPrograms loads each sensor's BPF object and attaches every one of
// its tracepoint programs where the sensor would, one check per
// attachment.
func checkPrograms(hide map[string]bool) []Check {
	var out []Check
	var costs []verification
	for _, o := range objects() {
		checks, cost := checkObject(o, hide)
		for _, c := range checks {
			if o.optional && c.Status == Fail {
				// A run notes the sensor's absence and goes on.
				c.Status = Note
			}
			out = append(out, c)
		}
		if cost.total > 0 {
			costs = append(costs, cost)
		}
	}
	if len(costs) > 0 {
		out = append(out, verificationCheck(costs))
	}
	return out
}

// verification is what the kernel's verifier took to check one object's
// programs, as its statistics say.
type verification struct {
	sensor string
	total  time.Duration
	// largest is the program that took longest, and its time.
	largest     string
	largestTime time.Duration
}

// verificationTime matches the verifier's statistics line.
var verificationTime = regexp.MustCompile(`verification time (\d+) usec`)

// verificationOf sums the verification times in coll's programs' logs.
func verificationOf(sensor string, coll *ebpf.Collection) verification {
	v := verification{sensor: sensor}
	for name, p := range coll.Programs {
		m := verificationTime.FindStringSubmatch(p.VerifierLog)
		if m == nil {
			continue
		}
		us, _ := strconv.Atoi(m[1])
		d := time.Duration(us) * time.Microsecond
		v.total += d
		if d > v.largestTime || (d == v.largestTime && name < v.largest) {
			v.largest, v.largestTime = name, d
		}
	}
	return v
}

// slowStart is the verification above which the check-up notes that
// coldtrace starts slowly on this kernel: most of a start is the
// verifier, and the start's budget is 100 ms.
const slowStart = 150 * time.Millisecond

// verificationCheck says how long the verifier took to check the
// sensors' programs as a run loads them (Python stacks on): most of
// coldtrace's start, spread over the CPUs.
func verificationCheck(costs []verification) Check {
	var total time.Duration
	parts := make([]string, 0, len(costs))
	for _, c := range costs {
		total += c.total
		parts = append(parts, fmt.Sprintf("%s %s (%s %s)", c.sensor, c.total.Round(100*time.Microsecond),
			c.largest, c.largestTime.Round(100*time.Microsecond)))
	}
	c := Check{Status: OK, Name: "verification, most of coldtrace's start",
		Detail: fmt.Sprintf("the kernel's verifier took %s to check the programs a run loads: %s",
			total.Round(100*time.Microsecond), strings.Join(parts, ", "))}
	if total > slowStart {
		c.Status = Note
		c.Detail += fmt.Sprintf("; over %s: coldtrace starts slowly on this kernel (its start waits for most of it)", slowStart)
	}
	return c
}

func checkObject(o object, hide map[string]bool) ([]Check, verification) {
	spec, err := o.load()
	if err != nil {
		return []Check{{Status: Fail, Name: o.sensor + " probes", Detail: err.Error(), Lacks: o.lacks}}, verification{}
	}
	// Loaded as a run loads it with Python stacks on: the walker's code
	// is then checked too, and the verification timed as a run's.
	if v := spec.Variables["py_stacks_on"]; v != nil {
		if err := v.Set(uint32(1)); err != nil {
			return []Check{{Status: Fail, Name: o.sensor + " probes", Detail: err.Error(), Lacks: o.lacks}}, verification{}
		}
	}
	targets := targetsOf(spec, o.pathSyscalls)
	for _, ps := range spec.Programs {
		if ps.Type == ebpf.Tracing && hide[ps.AttachTo] {
			ps.AttachTo = hiddenName(ps.AttachTo)
		}
	}
	loadErrs := map[string]error{}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
	var cost verification
	if err == nil {
		cost = verificationOf(o.sensor, coll)
	} else {
		// Find which programs the kernel refuses, one at a time.
		for name := range spec.Programs {
			one := spec.Copy()
			for other := range one.Programs {
				if other != name {
					delete(one.Programs, other)
				}
			}
			c, err := ebpf.NewCollection(one)
			if err != nil {
				loadErrs[name] = err
				continue
			}
			c.Close()
		}
		if len(loadErrs) == 0 {
			return []Check{{Status: Fail, Name: o.sensor + " probes", Detail: err.Error(), Lacks: o.lacks}}, verification{}
		}
		// The others are attached for real all the same.
		rest := spec.Copy()
		for name := range loadErrs {
			delete(rest.Programs, name)
		}
		if coll, err = ebpf.NewCollection(rest); err != nil {
			coll = nil
		}
	}
	var out []Check
	for _, t := range targets {
		c := Check{Status: OK, Name: fmt.Sprintf("%s (%s)", t, o.sensor)}
		if err := loadErrs[t.prog]; err != nil {
			c.Status, c.Detail = Fail, fmt.Sprintf("%s does not load: %v", t.prog, err)
		} else if coll == nil {
			c.Status, c.Detail = Fail, "not attached: the object did not load"
		} else if err := attach(coll.Programs[t.prog], t, hide); err != nil {
			c.Status, c.Detail = Fail, err.Error()
		}
		if c.Status == Fail {
			c.Lacks = o.lacks
			if t.optional {
				c.Status, c.Lacks = Note, t.name+" calls in kernel-cache lookups"
				if t.lacks != "" {
					c.Lacks = t.lacks
				}
			}
		}
		out = append(out, c)
	}
	if coll != nil {
		coll.Close()
	}
	return out, cost
}

// targetsOf lists the attachments of an object's tracepoint programs,
// sorted; uprobes are checked apart (checkUprobes).
func targetsOf(spec *ebpf.CollectionSpec, pathSyscalls bool) []target {
	var out []target
	for name, ps := range spec.Programs {
		if strings.HasPrefix(name, "probe_") {
			// A feature probe, loaded alone and never attached
			// (checkFillEnds).
			continue
		}
		switch ps.Type {
		case ebpf.Tracing:
			t := target{kind: "tp_btf", name: ps.AttachTo, prog: name}
			if ps.AttachTo == "tcp_sendmsg_locked" {
				// A run stubs it where the kernel lacks it: names
				// then come from lookups only.
				t.optional, t.lacks = true, "host names of connections no lookup named (a TLS server name, an HTTP Host header)"
			}
			out = append(out, t)
		case ebpf.TracePoint:
			group, tp, _ := strings.Cut(ps.AttachTo, "/")
			if pathSyscalls && group == "syscalls" {
				continue
			}
			t := target{kind: "tracepoint", group: group, name: tp, prog: name}
			switch {
			case name == "on_read_exit":
				// Attached only where task works are refused.
				t.optional, t.lacks = true, tp+": where task works are refused, the CPU time of a read's copy of its last pages"
			case group == "syscalls":
				// The network sensor's write hooks: without them a
				// download written to tmpfs is not linked to its file.
				t.optional, t.lacks = true, tp+": the file a download wrote to tmpfs"
			}
			out = append(out, t)
		}
	}
	if pathSyscalls {
		for _, sc := range jit.PathSyscalls() {
			out = append(out,
				target{kind: "tracepoint", group: "syscalls", name: "sys_enter_" + sc.Name, prog: fmt.Sprintf("on_path_enter%d", sc.Args), optional: !sc.Required},
				target{kind: "tracepoint", group: "syscalls", name: "sys_exit_" + sc.Name, prog: "on_path_exit", optional: !sc.Required})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind > out[j].kind
		}
		return out[i].group+":"+out[i].name < out[j].group+":"+out[j].name
	})
	return out
}

func attach(prog *ebpf.Program, t target, hide map[string]bool) error {
	if prog == nil {
		return fmt.Errorf("program %s is missing from its object", t.prog)
	}
	var l link.Link
	var err error
	switch t.kind {
	case "tp_btf":
		l, err = link.AttachTracing(link.TracingOptions{Program: prog})
	default:
		name := t.name
		if hide[name] {
			name = hiddenName(name)
		}
		l, err = link.Tracepoint(t.group, name, prog, nil)
	}
	if err != nil {
		return fmt.Errorf("attach %s: %w", t, err)
	}
	return l.Close()
}

// uprobeTarget is a function of coldtrace's own that the uprobe check
// probes and then calls.
//
//go:noinline
func uprobeTarget(n int) int { return n*7 + 1 }

// checkUprobes attaches a counting uprobe to a function of coldtrace's
// own executable, calls it, and reads the count; then attaches each
// sensor's uprobe programs where they go (libc's getaddrinfo).
func checkUprobes() Check {
	c := Check{Name: "uprobes", Lacks: "in-process compile times (--jit-uprobe, libcuda, Triton) and download host names"}
	fired, err := uprobeFires()
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		return c
	}
	if fired != 1 {
		c.Status, c.Detail = Fail, fmt.Sprintf("a uprobe attached but counted %d calls of 1", fired)
		return c
	}
	c.Detail = "a uprobe on coldtrace's own code fired once for one call"
	if n, err := attachSensorUprobes(); err != nil {
		c.Status, c.Detail = Fail, c.Detail+"; "+err.Error()
	} else if n > 0 {
		c.Detail += fmt.Sprintf("; %d sensor uprobe programs attached to libc's getaddrinfo", n)
	}
	return c
}

func uprobeFires() (uint64, error) {
	counts, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return 0, fmt.Errorf("create the uprobe check's map: %w", err)
	}
	defer counts.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Kprobe, License: "GPL", Instructions: asm.Instructions{
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, counts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}})
	if err != nil {
		return 0, fmt.Errorf("load the uprobe check: %w", err)
	}
	defer prog.Close()
	pc := reflect.ValueOf(uprobeTarget).Pointer()
	symbol := runtime.FuncForPC(pc).Name()
	// By file offset, not by name: a stripped coldtrace (go test's
	// binaries are) has no symbol table.
	file, off, err := fileOffset(pc)
	if err != nil {
		return 0, fmt.Errorf("find %s in coldtrace's executable: %w", symbol, err)
	}
	ex, err := link.OpenExecutable(file)
	if err != nil {
		return 0, fmt.Errorf("open %s for uprobes: %w", file, err)
	}
	// Filtered by pid: only coldtrace itself traps on it.
	l, err := ex.Uprobe(symbol, prog, &link.UprobeOptions{Address: off, PID: os.Getpid()})
	if err != nil {
		return 0, fmt.Errorf("attach a uprobe to %s in %s: %w", symbol, file, err)
	}
	defer l.Close()
	// Called on this thread after the probe is in place.
	if uprobeTarget(6) != 43 {
		return 0, errors.New("uprobe check: wrong arithmetic")
	}
	var n uint64
	if err := counts.Lookup(uint32(0), &n); err != nil {
		return 0, fmt.Errorf("read the uprobe count: %w", err)
	}
	return n, nil
}

// attachSensorUprobes attaches the sensors' uprobe programs to libc's
// getaddrinfo (where the download sensor puts its own) and detaches them;
// it returns how many, 0 when no libc is mapped into coldtrace. They are
// attached the way a run attaches them (uprobe_multi links where the
// kernel has them), filtered to coldtrace's own pid: no other process
// traps on them meanwhile.
func attachSensorUprobes() (int, error) {
	libc := mappedLibc()
	if libc == "" {
		return 0, nil
	}
	ex, err := link.OpenExecutable(libc)
	if err != nil {
		return 0, fmt.Errorf("open %s for uprobes: %w", libc, err)
	}
	multi := features.HaveBPFLinkUprobeMulti() == nil
	n := 0
	for _, o := range objects() {
		spec, err := o.load()
		if err != nil {
			return n, err
		}
		for name, ps := range spec.Programs {
			if ps.Type != ebpf.Kprobe {
				delete(spec.Programs, name)
			} else if multi {
				ps.AttachType = ebpf.AttachTraceUprobeMulti
			}
		}
		if len(spec.Programs) == 0 {
			continue
		}
		coll, err := ebpf.NewCollection(spec)
		if err != nil {
			return n, fmt.Errorf("load the %s uprobe programs: %w", o.sensor, err)
		}
		for name, ps := range spec.Programs {
			l, err := attachOwn(ex, coll.Programs[name], strings.HasPrefix(ps.SectionName, "uretprobe"), multi)
			if err != nil {
				coll.Close()
				return n, fmt.Errorf("attach %s (%s) to %s:getaddrinfo: %w", name, o.sensor, filepath.Base(libc), err)
			}
			l.Close()
			n++
		}
		coll.Close()
	}
	return n, nil
}

// attachOwn attaches prog to getaddrinfo in ex for coldtrace's own pid.
func attachOwn(ex *link.Executable, prog *ebpf.Program, ret, multi bool) (link.Link, error) {
	pid := os.Getpid()
	switch {
	case multi && ret:
		return ex.UretprobeMulti([]string{"getaddrinfo"}, prog, &link.UprobeMultiOptions{PID: uint32(pid)})
	case multi:
		return ex.UprobeMulti([]string{"getaddrinfo"}, prog, &link.UprobeMultiOptions{PID: uint32(pid)})
	case ret:
		return ex.Uretprobe("getaddrinfo", prog, &link.UprobeOptions{PID: pid})
	}
	return ex.Uprobe("getaddrinfo", prog, &link.UprobeOptions{PID: pid})
}

// fileOffset finds the file mapped at pc in this process and pc's offset
// in it, from /proc/self/maps.
func fileOffset(pc uintptr) (string, uint64, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(fields[2], 16, 64)
		if !ok || errors.Join(err1, err2, err3) != nil {
			continue
		}
		if uint64(pc) >= start && uint64(pc) < end {
			return fields[5], uint64(pc) - start + off, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", 0, err
	}
	return "", 0, fmt.Errorf("no file is mapped at %#x", pc)
}

// mappedLibc is the C library coldtrace itself has mapped, if any.
func mappedLibc() string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && strings.HasPrefix(filepath.Base(fields[5]), "libc.so") {
			return fields[5]
		}
	}
	return ""
}
