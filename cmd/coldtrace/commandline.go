package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// newFlagSet is the flag set of a subcommand: errors and usage go to
// stderr, the usage being usage then the flags' defaults.
func newFlagSet(name, usage string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs. The error is pflag.ErrHelp after
// --help (the usage is printed), or wraps errUsage.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// parseFailed is the exit code of a command whose flags did not parse:
// 0 after --help, a usage failure otherwise.
func parseFailed(stderr io.Writer, err error) int {
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	return fail(stderr, exitUsage, err)
}

// encodeJSON writes v as indented JSON, the form of every --json output.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
