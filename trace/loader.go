package trace

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/trace/download"
	"github.com/coldtrace/coldtrace/trace/evict"
	"github.com/coldtrace/coldtrace/trace/gpu"
	"github.com/coldtrace/coldtrace/trace/jit"
	"github.com/coldtrace/coldtrace/trace/machine"
	"github.com/coldtrace/coldtrace/trace/pagecache"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/pystack"
	"github.com/coldtrace/coldtrace/trace/sched"
	"github.com/coldtrace/coldtrace/trace/uprobes"
)

// loader loads the table of sensors (Sensors) for one session, a lane
// (goroutine) per row, every lane at once: the verifier runs in the
// loading thread, and one object after another was some 150 ms of a
// 200 ms start on two CPUs. A row's lane waits for the rows that create
// the maps it takes (the table's Creates and Takes), makes its sensor
// (the maps it creates exist from then on), then loads its programs.
// The first row, the scheduler, is made before the lanes start: every
// other sensor follows the processes it tracks.
type loader struct {
	s      *session
	kernel *btf.Cache
	rows   []SensorSpec
	lanes  []lane
	// jit is the JIT sensor once every row is loaded: path records and
	// downloads reach it only once the command runs.
	jit atomic.Pointer[jit.Sensor]
}

// lane is one row's load.
type lane struct {
	made   chan struct{} // closed once the sensor exists, or will not
	loaded chan struct{} // closed once its programs loaded, or failed
	sensor Sensor        // nil: off, or it could not be made
	maps   map[string]*ebpf.Map
	err    error
	// dropped: an optional sensor whose programs failed to load, closed
	// and left out of the session (read only after every lane ended).
	dropped bool
}

// sensorMaps is a sensor whose object makes maps for the others:
// Replacements are they by their names in the BPF objects.
type sensorMaps interface {
	Replacements() map[string]*ebpf.Map
}

// load loads every sensor of the table the options leave on, in lanes;
// the loaded ones (an error's too, for close) become the session's
// sensors in the table's order.
func (s *session) load() error {
	// One kernel BTF for every load: each object decoding its own was
	// some 30 ms of CPU apiece at startup.
	kernel := btf.NewCache()
	// Decoded (some 10 ms) while the scheduler's maps are made: the
	// first load that needs it waits for it; an error is theirs to say.
	go func() { _, _ = kernel.Kernel() }()
	l := &loader{s: s, kernel: kernel, rows: Sensors()}
	err := l.run()
	for i, ln := range l.lanes {
		if ln.sensor != nil && !ln.dropped {
			s.sensors = append(s.sensors, l.lanes[i].sensor)
		}
	}
	s.sched = loadedAs[*sched.Sensor](s.sensors)
	s.uprobes = loadedAs[*uprobes.Scoper](s.sensors)
	if err != nil {
		return err
	}
	for _, row := range l.rows {
		if row.link == nil {
			continue
		}
		if err := row.link(l); err != nil {
			return err
		}
	}
	return nil
}

// run loads every row and returns their errors.
func (l *loader) run() error {
	l.lanes = make([]lane, len(l.rows))
	for i := range l.lanes {
		l.lanes[i].made, l.lanes[i].loaded = make(chan struct{}), make(chan struct{})
	}
	first, err := l.make(0)
	if err != nil {
		close(l.lanes[0].loaded)
		for i := 1; i < len(l.lanes); i++ {
			close(l.lanes[i].made)
			close(l.lanes[i].loaded)
		}
		return err
	}
	var wg sync.WaitGroup
	for i := range l.rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 {
				l.start(0, first)
				return
			}
			start, err := l.make(i)
			if err != nil {
				l.lanes[i].err = err
				close(l.lanes[i].loaded)
				return
			}
			l.start(i, start)
		}()
	}
	wg.Wait()
	errs := make([]error, 0, len(l.lanes))
	for _, ln := range l.lanes {
		errs = append(errs, ln.err)
	}
	return errors.Join(errs...)
}

// make makes row i's sensor, unless the options turn it off or a row it
// takes maps from failed (whose error is the load's), and closes its
// made; it returns the sensor's program load, if any.
func (l *loader) make(i int) (start func() error, err error) {
	row, ln := l.rows[i], &l.lanes[i]
	defer close(ln.made)
	if row.make == nil || (row.off != nil && row.off(l.s.opts)) {
		return nil, nil
	}
	taken, ok := l.taken(row)
	if !ok {
		return nil, nil
	}
	sn, start, err := row.make(l, taken)
	if err != nil {
		return nil, l.optional(row, err)
	}
	if len(row.Creates) > 0 {
		m, ok := sn.(sensorMaps)
		if !ok {
			_ = sn.Close()
			return nil, fmt.Errorf("load %s: the sensor shares no maps", row.Name)
		}
		all := m.Replacements()
		ln.maps = make(map[string]*ebpf.Map, len(row.Creates))
		for _, name := range row.Creates {
			if all[name] == nil {
				_ = sn.Close()
				return nil, fmt.Errorf("load %s: it does not make the map %s", row.Name, name)
			}
			ln.maps[name] = all[name]
		}
	}
	ln.sensor = sn
	return start, nil
}

// start loads row i's programs in its lane, and closes its loaded.
func (l *loader) start(i int, start func() error) {
	ln := &l.lanes[i]
	defer close(ln.loaded)
	if start == nil {
		return
	}
	if err := start(); err != nil {
		if ln.err = l.optional(l.rows[i], err); ln.err == nil {
			_ = ln.sensor.Close()
			ln.dropped = true
		}
	}
}

// optional is a row's error, or nil and a note for an optional sensor:
// it costs the run its part, not the run.
func (l *loader) optional(row SensorSpec, err error) error {
	if !row.Optional {
		return err
	}
	if l.s.opts.Notify != nil {
		l.s.opts.Notify("no " + row.Name + ": " + err.Error())
	}
	return nil
}

// taken are the maps row takes, once the rows that create them are made;
// a map whose row is off or optional and failed is absent. ok is false
// when such a row failed with an error.
func (l *loader) taken(row SensorSpec) (maps map[string]*ebpf.Map, ok bool) {
	maps = make(map[string]*ebpf.Map, len(row.Takes))
	for _, name := range row.Takes {
		by := slices.IndexFunc(l.rows, func(r SensorSpec) bool { return slices.Contains(r.Creates, name) })
		if by < 0 {
			continue
		}
		<-l.lanes[by].made
		if l.lanes[by].err != nil {
			return nil, false
		}
		if m := l.lanes[by].maps[name]; m != nil {
			maps[name] = m
		}
	}
	return maps, true
}

// need is the sensor of type T once its row made it; nil when that row
// is off or could not make it. A row needs only rows that do not need
// it.
func need[T Sensor](l *loader) T {
	var none T
	i := slices.IndexFunc(l.rows, func(r SensorSpec) bool { return r.is(none) })
	if i < 0 {
		return none
	}
	<-l.lanes[i].made
	t, _ := l.lanes[i].sensor.(T)
	return t
}

// on says whether the options leave the sensor of type T on.
func on[T Sensor](l *loader) bool {
	var none T
	i := slices.IndexFunc(l.rows, func(r SensorSpec) bool { return r.is(none) })
	return i >= 0 && (l.rows[i].off == nil || !l.rows[i].off(l.s.opts))
}

// loadedAs is the loaded sensor of type T, or nil.
func loadedAs[T Sensor](sensors []Sensor) T {
	for _, sn := range sensors {
		if t, ok := sn.(T); ok {
			return t
		}
	}
	var none T
	return none
}

// The rows' makers. Each returns its sensor with the maps it creates
// made, and the load of its programs (nil when made is loaded).

func makeSched(l *loader, _ map[string]*ebpf.Map) (Sensor, func() error, error) {
	// A secure exec (a setuid program) stays traced only for a real
	// root login: under sudo the user would see what root read for it.
	sc, err := sched.Prepare(sched.Options{BTF: l.kernel, TraceSecureExec: l.s.opts.Actor.IsRoot()})
	if err != nil {
		return nil, nil, err
	}
	return sc, sc.Start, nil
}

func makeStacks(l *loader, taken map[string]*ebpf.Map) (Sensor, func() error, error) {
	ps, err := pystack.Prepare(pystack.Options{TaskStates: taken[bpfsched.SchedMapTaskStates],
		Tracked: taken[bpfsched.SchedMapTrackedTgids], Threads: taken[bpfsched.SchedMapThreads], BTF: l.kernel})
	if err != nil {
		return nil, nil, err
	}
	return ps, ps.Start, nil
}

func makePagecache(l *loader, taken map[string]*ebpf.Map) (Sensor, func() error, error) {
	o := pagecache.Options{Shared: taken, Waiting: need[*sched.Sensor](l).Waiting, BTF: l.kernel,
		NoReadExits: l.s.opts.NoReadExits}
	if on[*jit.Sensor](l) {
		o.FileSeen = func(f probe.FileSeen) {
			if j := l.jit.Load(); j != nil {
				j.FileSeen(f)
			}
		}
	}
	if ps := need[*pystack.Sensor](l); ps != nil {
		o.Stacks, o.InternStack, o.StackPID = ps.Replacements(), ps.Intern, ps.PIDOf
	}
	pc, err := pagecache.New(o)
	if err != nil {
		return nil, nil, err
	}
	return pc, nil, nil
}

func makeEvict(l *loader, taken map[string]*ebpf.Map) (Sensor, func() error, error) {
	ev, err := evict.New(evict.Options{Shared: taken, Traced: need[*sched.Sensor](l).Tracked().Has, BTF: l.kernel, Chained: true})
	if err != nil {
		return nil, nil, err
	}
	return ev, nil, nil
}

func makeMachine(l *loader, _ map[string]*ebpf.Map) (Sensor, func() error, error) {
	sc := need[*sched.Sensor](l)
	m, err := machine.New(machine.Options{Traced: sc.Tracked().Has, LivePIDs: sc.LivePIDs})
	if err != nil {
		return nil, nil, err
	}
	return m, nil, nil
}

func makeJIT(l *loader, taken map[string]*ebpf.Map) (Sensor, func() error, error) {
	o := l.s.opts
	jo := jit.Options{Shared: taken, Command: o.Command, Env: o.Env, CacheDirs: o.CacheDirs,
		Uprobes: o.JITUprobes, Syscalls: o.JITSyscalls, Actor: o.Actor.CommandActor(), BTF: l.kernel,
		Scoper: need[*uprobes.Scoper](l)}
	if ps := need[*pystack.Sensor](l); ps != nil {
		jo.Stacks, jo.InternStack, jo.StackPID = ps.Replacements(), ps.Intern, ps.PIDOf
	}
	j, err := jit.New(jo)
	if errors.Is(err, jit.ErrOption) {
		return nil, nil, fmt.Errorf("%w: %v", ErrPreflight, err)
	}
	if err != nil {
		return nil, nil, err
	}
	return j, nil, nil
}

func makeDownload(l *loader, taken map[string]*ebpf.Map) (Sensor, func() error, error) {
	o := download.Options{TaskStates: taken[bpfsched.SchedMapTaskStates], Threads: taken[bpfsched.SchedMapThreads],
		Tracked: taken[bpfsched.SchedMapTrackedTgids],
		Rights:  l.s.opts.Actor.CommandActor(), BTF: l.kernel, Uprobes: need[*uprobes.Scoper](l), Chained: true}
	if on[*jit.Sensor](l) {
		// Downloads are seen at polls, once the command runs.
		o.OnDownload = func(pid int32) {
			if j := l.jit.Load(); j != nil {
				j.DownloadSeen(pid)
			}
		}
	}
	if ps := need[*pystack.Sensor](l); ps != nil {
		o.Stacks, o.InternStack, o.StackPID = ps.Replacements(), ps.Intern, ps.PIDOf
	}
	dl, err := download.Prepare(o)
	if err != nil {
		return nil, nil, err
	}
	return dl, dl.Start, nil
}

// makeUprobes makes the owner of every uprobe link (they go into traced
// processes only: the scheduler's tracked set says which); its lane then
// covers the gated command with the links of the libraries known now,
// once the rows that make uprobes are loaded.
func makeUprobes(l *loader, _ map[string]*ebpf.Map) (Sensor, func() error, error) {
	sc := uprobes.New(uprobes.Options{LivePIDs: need[*sched.Sensor](l).LivePIDs})
	return sc, func() error {
		for i, row := range l.rows {
			if !row.Uprobes {
				continue
			}
			if <-l.lanes[i].loaded; l.lanes[i].err != nil {
				return nil // the load fails: no command to cover
			}
		}
		l.s.trackGated(sc)
		return nil
	}, nil
}

func makeGPU(l *loader, _ map[string]*ebpf.Map) (Sensor, func() error, error) {
	g, err := gpu.New(gpu.Options{Interval: l.s.opts.GPUInterval, Traced: need[*sched.Sensor](l).Tracked().Has})
	if err != nil {
		return nil, nil, err
	}
	return g, nil, nil
}

// chainInsertions has the page cache's program on
// mm_filemap_add_to_page_cache run the eviction and network sensors'
// programs for that tracepoint: one program there, not three.
func chainInsertions(l *loader) error {
	sensors := l.s.sensors
	var untracked, tracked *ebpf.Program
	if ev := loadedAs[*evict.Sensor](sensors); ev != nil {
		untracked = ev.InsertProgram()
	}
	if dl := loadedAs[*download.Sensor](sensors); dl != nil {
		tracked = dl.WriteProgram()
	}
	return loadedAs[*pagecache.Sensor](sensors).Chain(untracked, tracked)
}

// jitSees hands the JIT sensor the path records and downloads of the
// other sensors from now on.
func jitSees(l *loader) error {
	l.jit.Store(loadedAs[*jit.Sensor](l.s.sensors))
	return nil
}
