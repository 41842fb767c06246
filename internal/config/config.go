// Package config reads coldtrace's machine-wide configuration,
// /etc/coldtrace/config: what an administrator allows coldtrace to do as
// root on behalf of a user who runs it under sudo.
//
// The file is lines of "KEY VALUE"; blank lines and lines starting with
// '#' are ignored. The one key so far:
//
//	push-allow PREFIX   a URL prefix (scheme://host[:port][/path]) that
//	                    --push may send to under sudo; repeatable
//
// The file is trusted only when root owns it, and it and every directory
// above it are writable by root alone: otherwise any user who could write
// it could widen what root does for them.
package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Path is where the machine-wide configuration lives.
const Path = "/etc/coldtrace/config"

// maxSize bounds the file: a configuration is a few lines.
const maxSize = 1 << 20

// Config is the parsed file.
type Config struct {
	// Path is the file it came from ("" when there was none).
	Path string
	// PushAllow are the URL prefixes a push under sudo may go to; nil
	// when the file lists none (see PushAllowed).
	PushAllow []*url.URL
}

// ErrUntrusted marks a file that root must not follow: owned by someone
// else, or writable by others.
var ErrUntrusted = errors.New("not trusted")

// Load reads the configuration at path. A missing file is no error: it
// returns an empty Config with Path "". A file that is not root's alone
// to write fails with ErrUntrusted.
func Load(path string) (Config, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	defer f.Close()
	if err := trusted(f, path); err != nil {
		return Config{}, err
	}
	c, err := Parse(io.LimitReader(f, maxSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// trusted checks the open file and the directories above it: regular,
// owned by root, not writable by group or others.
func trusted(f *os.File, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("config %s: %w: not a regular file", path, ErrUntrusted)
	}
	if err := rootOnly(path, st); err != nil {
		return err
	}
	if st.Size > maxSize {
		return fmt.Errorf("config %s: larger than %d bytes", path, maxSize)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if err := unix.Stat(dir, &st); err != nil {
			return fmt.Errorf("config %s: %s: %w", path, dir, err)
		}
		// A sticky directory (/tmp) lets others add names but not
		// replace root's.
		if st.Mode&unix.S_ISVTX == 0 {
			if err := rootOnly(dir, st); err != nil {
				return fmt.Errorf("config %s: %w", path, err)
			}
		}
		if dir == "/" {
			return nil
		}
	}
}

func rootOnly(name string, st unix.Stat_t) error {
	if st.Uid != 0 {
		return fmt.Errorf("%s: %w: owned by uid %d, not root", name, ErrUntrusted, st.Uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%s: %w: writable by group or others (mode %04o)", name, ErrUntrusted, st.Mode&0o7777)
	}
	return nil
}

// Parse reads the lines of a configuration. An unknown key or a bad value
// is an error naming its line: a typo must not silently allow more.
func Parse(r io.Reader) (Config, error) {
	var c Config
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxSize)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, _ := strings.Cut(line, " ")
		value = strings.TrimSpace(value)
		switch key {
		case "push-allow":
			u, err := parsePrefix(value)
			if err != nil {
				return Config{}, fmt.Errorf("line %d: push-allow %q: %w", n, value, err)
			}
			c.PushAllow = append(c.PushAllow, u)
		default:
			return Config{}, fmt.Errorf("line %d: unknown key %q", n, key)
		}
	}
	if err := sc.Err(); err != nil {
		return Config{}, fmt.Errorf("line %d: %w", n+1, err)
	}
	return c, nil
}

func parsePrefix(s string) (*url.URL, error) {
	if s == "" || strings.ContainsAny(s, " \t") {
		return nil, errors.New("want one URL prefix")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("want an http:// or https:// URL")
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("want scheme://host[:port][/path], with no user, query or fragment")
	}
	if hasDotSegment(u.Path) {
		return nil, errors.New("the path has a . or .. segment")
	}
	return u, nil
}

// PushAllowed reports whether a push to raw may go ahead under sudo. With
// no file (Path ""), every push may. With a file, raw must match one of
// its push-allow prefixes: the same scheme, the same host and port, and a
// path equal to the prefix's or below it (the prefix "http://gw/a"
// admits "http://gw/a" and "http://gw/a/b", never "http://gw/ab").
func (c Config) PushAllowed(raw string) bool {
	if c.Path == "" {
		return true
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || hasDotSegment(u.Path) {
		return false
	}
	for _, p := range c.PushAllow {
		if strings.EqualFold(u.Scheme, p.Scheme) && strings.EqualFold(u.Host, p.Host) && underPath(u.EscapedPath(), p.EscapedPath()) {
			return true
		}
	}
	return false
}

func underPath(p, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return true
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// hasDotSegment reports a "." or ".." path segment, which a server may
// resolve to a path outside the prefix.
func hasDotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
