// Package command is what every pkie command is built on: the
// environment it may touch (Env), its table entry (Command), flag parsing
// that allows flags after arguments, usage errors and exit codes, JSON
// output, and the dispatch from a command line to a command (Main). The
// commands themselves live in the family packages beside it (serve,
// client, measure, bench); internal/cli holds the table.
package command

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/option"
	"github.com/pkie/pkie/internal/termtext"
)

// Exit codes shared by every command.
const (
	ExitOK       = 0
	ExitNegative = 1 // the check ran and the answer is "no" (e.g. not trusted)
	ExitUsage    = 2 // bad usage or an operational error
)

// Env is what a command may touch of the outside world. Tests build their own.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// OSEnv returns the process's real environment.
func OSEnv() *Env {
	return &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// Func runs a command on its arguments (those after its name). It returns
// an error to report; an *ExitError carries a specific exit code.
type Func func(ctx context.Context, env *Env, args []string) error

// Command is one command or subcommand: its name, one line saying what it
// does, and its Func.
type Command struct {
	Name    string
	Summary string
	Run     Func
}

// ExitError asks Main to exit with Code after printing Msg (if any).
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// UsageError reports bad usage: exit code 2.
func UsageError(format string, a ...any) error {
	return &ExitError{Code: ExitUsage, Msg: fmt.Sprintf(format, a...)}
}

// Negative reports a completed check whose answer is no: exit code 1, no
// extra message (the command already printed its result).
func Negative() error { return &ExitError{Code: ExitNegative} }

// OptionError turns a library's *option.Error into a usage error naming
// the command's flags (names maps Options fields to them); other errors
// pass as they are.
func OptionError(err error, names map[string]string) error {
	var oe *option.Error
	if errors.As(err, &oe) {
		return UsageError("%s", oe.Rename(names))
	}
	return err
}

// Main runs the command of cmds named by args[0] and returns the process
// exit code; with no arguments or "help" it prints the list.
func Main(ctx context.Context, env *Env, cmds []Command, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			return Main(ctx, env, cmds, []string{args[1], "--help"})
		}
		printHelp(env.Stdout, cmds)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range cmds {
		if c.Name != args[0] {
			continue
		}
		return ReportExit(env, c.Name, c.Run(ctx, env, args[1:]))
	}
	fmt.Fprintf(env.Stderr, "pkie: unknown command %q; run \"pkie help\" for the list\n", args[0])
	return ExitUsage
}

// ReportExit reports err, the outcome of the command name, on env.Stderr
// and returns the process exit code.
func ReportExit(env *Env, name string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	// An error may repeat what a remote party or a file chose (a
	// server's certificate names, a peer's message, a bundle's name):
	// escaped, it stays one line and cannot drive the terminal.
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Msg != "" {
			fmt.Fprintf(env.Stderr, "pkie %s: %s\n", name, termtext.Escape(ee.Msg))
		}
		return ee.Code
	}
	// Errors of the command's own package already name it
	// ("cloud: …"); the prefix is said once.
	fmt.Fprintf(env.Stderr, "pkie %s: %s\n", name, termtext.Escape(strings.TrimPrefix(err.Error(), name+": ")))
	return ExitUsage
}

func printHelp(w io.Writer, cmds []Command) {
	fmt.Fprintln(w, "pkie trusts a TLS certificate on more evidence than one CA signature.")
	fmt.Fprintln(w, "\nUsage: pkie <command> [flags] [args]\n\nCommands:")
	cs := append([]Command(nil), cmds...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-12s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nRun \"pkie <command> --help\" for a command's flags.")
}

// NewFlags returns a FlagSet that reports errors instead of exiting and
// prints usage to env.Stderr.
func NewFlags(env *Env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("pkie "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "Usage: pkie %s %s\n\nFlags:\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// flagName finds a flag named in the flag package's errors ("-name").
var flagName = regexp.MustCompile(`(flag|defined:|argument:) -([A-Za-z0-9])`)

// asksHelp reports whether args hold -h, -help or --help before "--".
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// IsHelp reports whether arg asks for help.
func IsHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "help" }

// ParseFlags parses args, allowing flags after positional arguments
// ("pkie check example.com --json"), which people type all the time. A bad
// flag is named on one line with a pointer to -h, not followed by the whole
// usage; -h prints the usage. A negative duration is refused for every
// flag: none of pkie's durations means anything below zero.
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	out, usage := fs.Output(), fs.Usage
	// After a flag that takes a value, the flag package would read -h as
	// that value ("pkie verify --corpus -h", as verify's usage says to
	// type): no pkie flag takes -h as a value, so it always asks for help.
	if asksHelp(args) {
		usage()
		return nil, flag.ErrHelp
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = usage }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				usage()
				return nil, err
			}
			// pkie's docs spell flags --name; so do its errors.
			msg := flagName.ReplaceAllString(err.Error(), "$1 --$2")
			return nil, UsageError("%s (run \"%s -h\" for the flags)", msg, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			var neg error
			fs.Visit(func(f *flag.Flag) {
				if g, ok := f.Value.(flag.Getter); ok && neg == nil {
					if d, ok := g.Get().(time.Duration); ok && d < 0 {
						neg = UsageError("--%s %s is negative", f.Name, d)
					}
				}
			})
			if neg != nil {
				return nil, neg
			}
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// Group returns a command with subcommands, as "pkie obc get": usage is
// printed above the list of subs for -h or a missing subcommand.
func Group(name, summary, usage string, subs []Command) Command {
	return Command{Name: name, Summary: summary, Run: func(ctx context.Context, env *Env, args []string) error {
		names := make([]string, len(subs))
		for i, c := range subs {
			names[i] = c.Name
		}
		if len(args) > 0 && !IsHelp(args[0]) {
			for _, c := range subs {
				if c.Name == args[0] {
					return c.Run(ctx, env, args[1:])
				}
			}
			return UsageError("unknown subcommand %q; want %s (run \"pkie %s -h\")", args[0], strings.Join(names, ", "), name)
		}
		fmt.Fprintln(env.Stderr, usage)
		for _, c := range subs {
			fmt.Fprintf(env.Stderr, "  %-8s %s\n", c.Name, c.Summary)
		}
		if len(args) > 0 {
			return nil
		}
		return UsageError("want a subcommand: %s", strings.Join(names, ", "))
	}}
}

// WriteJSON prints v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// CheckOutput reports, before a long run, whether a file can be created at
// path (for a --plot PREFIX, path is the prefix): its directory must exist
// and be writable. A run whose results are then lost to a typo in an
// output path wastes the run.
func CheckOutput(flagName, path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return UsageError("%s %s: directory %s: %v", flagName, path, dir, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return UsageError("%s %s: %s is not a directory", flagName, path, dir)
	}
	f, err := os.CreateTemp(dir, ".pkie-write-test-*")
	if err != nil {
		return UsageError("%s %s: cannot write in %s: %v", flagName, path, dir, errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// MakeOutDir creates dir, parents included, for a flag naming a directory
// of outputs (as pkie replay report --plots does), and checks that files
// can be written in it: a run must not be lost to a directory not made yet.
func MakeOutDir(flagName, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return UsageError("%s %s: %v", flagName, dir, err)
	}
	return CheckOutput(flagName, filepath.Join(dir, "plot"))
}
