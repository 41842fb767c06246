package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/config"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/metrics"
	"github.com/coldtrace/coldtrace/report/pprof"
)

// metricsOptions are a run's labels and its Prometheus outputs.
type metricsOptions struct {
	labelPairs  []string
	pushURL     string
	textfileDir string
	// profileURL and profileHeaderFile are --push-profile and
	// --push-profile-header-file; profileHeader is the file's headers,
	// read before the run and kept nowhere else (they hold tokens).
	profileURL        string
	profileHeaderFile string
	profileHeader     http.Header

	labels map[string]string // parsed labelPairs
	actor  actor.Actor       // whose rights write the textfile
	// configPath is the machine-wide configuration that may restrict
	// pushes under sudo (config.Path; tests name another file).
	configPath string
}

// addFlags registers the label group (--label) and the metrics group
// (--push, --prom-textfile) on fs.
func (o *metricsOptions) addFlags(fs *pflag.FlagSet) {
	o.addLabelFlags(fs)
	o.addMetricsFlags(fs)
}

// addLabelFlags registers --label on fs.
func (o *metricsOptions) addLabelFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.labelPairs, "label", nil, "label the run `NAME=VALUE` (repeatable: host, rank, job, model); kept in the record, on every metric and pprof sample")
}

// addMetricsFlags registers --push, --prom-textfile, --push-profile and
// --push-profile-header-file on fs.
func (o *metricsOptions) addMetricsFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.pushURL, "push", "", "push the run's metrics to the Prometheus Pushgateway at `URL` (group: job and instance labels); a failed push is a warning")
	fs.StringVar(&o.textfileDir, "prom-textfile", "", "write the run's metrics into `DIR` for node_exporter's textfile collector (coldtrace_JOB_INSTANCE.prom, replaced atomically)")
	fs.StringVar(&o.profileURL, "push-profile", "", "push the run's pprof profile to a Pyroscope server at `URL` (its base or /ingest URL), or to Parca when the URL ends in /profiles/writeraw; service from --label service=NAME or the command's name; a failed push is a warning")
	fs.StringVar(&o.profileHeaderFile, "push-profile-header-file", "", "send the HTTP headers in `PATH` (\"Name: value\" lines: tenant, token) with --push-profile; read before the run, never recorded")
	o.configPath = config.Path
}

// check parses the labels and checks the outputs before the run, with
// the rights of a, the user coldtrace acts for.
func (o *metricsOptions) check(a actor.Actor) error {
	labels, err := metrics.ParseLabels(o.labelPairs)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	o.labels = labels
	if o.pushURL != "" {
		u, err := url.Parse(o.pushURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: --push %q: want an http:// or https:// URL of a Pushgateway", errUsage, o.pushURL)
		}
		if err := pushAllowed(a, o.configPath, "--push", o.pushURL); err != nil {
			return err
		}
	}
	if err := o.checkProfilePush(a); err != nil {
		return err
	}
	if o.textfileDir == "" {
		return nil
	}
	o.actor = a
	var st os.FileInfo
	if err := a.Do(func() (err error) { st, err = os.Stat(o.textfileDir); return err }); err != nil {
		return fmt.Errorf("%w: --prom-textfile: %v", errUsage, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: --prom-textfile %s: not a directory", errUsage, o.textfileDir)
	}
	host, _ := os.Hostname()
	probe := &record.Record{Labels: labels, Host: record.Host{Hostname: host}}
	return outfile.Check(o.actor, outfile.Output{Flag: "--prom-textfile", Path: filepath.Join(o.textfileDir, metrics.TextfileName(probe))})
}

// pushAllowed refuses, before the run, a push that root would send for a
// user under sudo to a URL the administrator did not allow: with a
// configuration file, only its push-allow prefixes; with none, any URL
// (the push is the user's own request, as it would be without sudo). A
// real root login is not restricted.
func pushAllowed(a actor.Actor, configPath, flag, rawURL string) error {
	if a.Via == "" || a.IsRoot() {
		return nil
	}
	c, err := config.Load(configPath)
	if err != nil {
		return fmt.Errorf("%s %s refused under %s: %w (the file must be root's alone to write)",
			flag, format.Escape(rawURL), a.Via, err)
	}
	if !c.PushAllowed(rawURL) {
		return fmt.Errorf("%s %s refused under %s: %s has no push-allow line that matches it",
			flag, format.Escape(rawURL), a.Via, c.Path)
	}
	return nil
}

// maxHeaderFile bounds --push-profile-header-file: a few headers.
const maxHeaderFile = 64 << 10

// checkProfilePush checks --push-profile before the run: a URL of a
// Pyroscope or Parca server, allowed under sudo as --push is (the same
// push-allow lines, matched against the URL the push goes to: with
// Pyroscope's /ingest appended), and reads the
// header file with a's rights. A header file without --push-profile is a
// usage error: the user meant to send it somewhere.
func (o *metricsOptions) checkProfilePush(a actor.Actor) error {
	if o.profileURL == "" {
		if o.profileHeaderFile != "" {
			return fmt.Errorf("%w: --push-profile-header-file needs --push-profile", errUsage)
		}
		return nil
	}
	_, target, err := pprof.Target(o.profileURL)
	if err != nil {
		return fmt.Errorf("%w: --push-profile %s: %v", errUsage, format.Escape(o.profileURL), err)
	}
	if err := pushAllowed(a, o.configPath, "--push-profile", target.String()); err != nil {
		return err
	}
	if o.profileHeaderFile == "" {
		return nil
	}
	f, err := a.Open(o.profileHeaderFile)
	if err != nil {
		return fmt.Errorf("%w: --push-profile-header-file: %v", errUsage, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHeaderFile+1))
	if err == nil && len(b) > maxHeaderFile {
		err = fmt.Errorf("larger than %d bytes", maxHeaderFile)
	}
	if err == nil {
		o.profileHeader, err = pprof.ParseHeaders(bytes.NewReader(b))
	}
	if err != nil {
		return fmt.Errorf("%w: --push-profile-header-file %s: %v", errUsage, format.Escape(o.profileHeaderFile), err)
	}
	return nil
}

// write publishes the run's metrics. A push that fails is a warning (the
// Pushgateway is someone else's service; the run's own outputs matter
// more); a textfile that cannot be written is an error.
func (o *metricsOptions) write(ctx context.Context, stderr io.Writer, rec *record.Record, res *attribution.Result) error {
	if o.pushURL != "" {
		if err := metrics.Push(ctx, o.pushURL, rec, res); err != nil {
			fmt.Fprintf(stderr, "coldtrace: warning: %v\n", err)
		}
	}
	if o.profileURL != "" {
		if err := pprof.Push(ctx, o.profileURL, o.profileHeader, rec, res); err != nil {
			fmt.Fprintf(stderr, "coldtrace: warning: %s\n", format.Escape(err.Error()))
		}
	}
	if o.textfileDir == "" {
		return nil
	}
	reg, err := metrics.Registry(rec, res)
	if err != nil {
		return err
	}
	path := filepath.Join(o.textfileDir, metrics.TextfileName(rec))
	return outfile.Write(o.actor, path, func(w io.Writer) error { return metrics.WriteText(w, reg) })
}
