package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/trace"
)

// TestAttachTakesRunsTraceFlags: every flag of the shared groups parses
// on attach as on run, to the same value.
func TestAttachTakesRunsTraceFlags(t *testing.T) {
	shared := []string{"--checkpoint", "2s", "--label", "job=j", "--push", "http://gw:9091",
		"--push-profile", "http://pyro:4040", "--push-profile-header-file", "/dev/null",
		"--prom-textfile", "/tmp", "--cache-dir", "x=/tmp", "--jit-uprobe", "/lib/x.so:f",
		"--json-fd", "3", "--top", "4", "--no-jit", "--no-network", "--no-gpu", "--jit-syscalls", "always",
		"--pprof", "p.pb.gz", "--timeline", "t.json", "-o", "r.rec"}
	r, err := parseRunFlags(append(append([]string(nil), shared...), "--", "true"), io.Discard)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	a, err := parseAttachFlags(append([]string{"--pid", "1"}, shared...), io.Discard)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	if r.traceOutputOptions != a.traceOutputOptions {
		t.Errorf("outputs differ: run %+v, attach %+v", r.traceOutputOptions, a.traceOutputOptions)
	}
	if r.checkpoints != a.checkpoints || r.metrics.textfileDir != a.metrics.textfileDir ||
		r.metrics.pushURL != a.metrics.pushURL || r.metrics.profileURL != a.metrics.profileURL ||
		r.metrics.profileHeaderFile != a.metrics.profileHeaderFile || a.metrics.profileURL == "" || strings.Join(r.metrics.labelPairs, ",") != strings.Join(a.metrics.labelPairs, ",") {
		t.Errorf("checkpoint or metrics flags differ: run %+v %+v, attach %+v %+v", r.checkpoints, r.metrics, a.checkpoints, a.metrics)
	}
	var ro, ao trace.Options
	r.sensorOptions.apply(&ro, func(string) string { return "" }, io.Discard)
	a.sensorOptions.apply(&ao, func(string) string { return "" }, io.Discard)
	if !ao.NoJIT || !ao.NoNetwork || !ao.NoGPU || ao.JITSyscalls != "always" || len(ao.CacheDirs) != 1 || len(ao.JITUprobes) != 1 {
		t.Errorf("attach's sensor options: %+v", ao)
	}
	if ro.NoJIT != ao.NoJIT || ro.NoNetwork != ao.NoNetwork || ro.GPUInterval != ao.GPUInterval {
		t.Errorf("sensor options differ: run %+v, attach %+v", ro, ao)
	}
}

// TestKillOnExitIsRunsAlone: attach starts no command to kill.
func TestKillOnExitIsRunsAlone(t *testing.T) {
	if _, err := parseAttachFlags([]string{"--pid", "1", "--kill-on-exit"}, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("attach --kill-on-exit: %v, want a usage error", err)
	}
}

// TestNoJITEnvStillWorksWithNote: COLDTRACE_NO_JIT=1 turns the JIT sensor
// off for one more release and says what replaces it, once.
func TestNoJITEnvStillWorksWithNote(t *testing.T) {
	for _, c := range []struct {
		env     string
		flag    bool
		want    bool
		warning int
	}{{"", false, false, 0}, {"1", false, true, 1}, {"0", false, false, 0}, {"", true, true, 0}, {"1", true, true, 1}} {
		var opts trace.Options
		var stderr bytes.Buffer
		sensorOptions{noJIT: c.flag, jitSyscalls: trace.JITSyscallsAuto}.apply(&opts,
			func(k string) string {
				if k == noJITEnv {
					return c.env
				}
				return ""
			}, &stderr)
		if opts.NoJIT != c.want || strings.Count(stderr.String(), "deprecated") != c.warning ||
			(c.warning > 0 && !strings.Contains(stderr.String(), "--no-jit")) {
			t.Errorf("env %q flag %v: NoJIT %v, stderr %q", c.env, c.flag, opts.NoJIT, stderr.String())
		}
	}
}

// TestPIDParsingAgreesOnAttachAndMark: one reader, one error.
func TestPIDParsingAgreesOnAttachAndMark(t *testing.T) {
	pids, err := parsePIDList("12, 34,,56")
	if err != nil || len(pids) != 3 || pids[0] != 12 || pids[1] != 34 || pids[2] != 56 {
		t.Errorf("parsePIDList: %v %v", pids, err)
	}
	for _, bad := range []string{"x", "0", "-3", "1.5"} {
		_, errList := parsePIDList("1," + bad)
		_, errOne := parsePID(bad)
		if !errors.Is(errList, errUsage) || errOne == nil || errList.Error() != errOne.Error() {
			t.Errorf("%q: list %v, one %v: want one usage error", bad, errList, errOne)
		}
	}
	var stderr bytes.Buffer
	if code := markCommand([]string{"--pid", "x", "L"}, io.Discard, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), `--pid "x": not a process id`) {
		t.Errorf("mark --pid x: %d %q", code, stderr.String())
	}
}

// TestBenchTakesTheSensorSwitches: bench turns sensors off as run does.
func TestBenchTakesTheSensorSwitches(t *testing.T) {
	o, err := parseBenchFlags([]string{"--no-jit", "--no-network", "--no-gpu", "--a", "true", "--b", "true"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.noJIT || !o.noNetwork || !o.noGPU {
		t.Errorf("bench sensor switches: jit %v network %v gpu %v", o.noJIT, o.noNetwork, o.noGPU)
	}
}
