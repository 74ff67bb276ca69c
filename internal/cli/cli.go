// Package cli turns pkie's command lines into library calls and prints the
// results for people or, with --json, for programs. It holds no logic of its
// own beyond flag parsing and formatting.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/option"
	"github.com/pkie/pkie/internal/termtext"
)

// Exit codes shared by every subcommand.
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

// command is one subcommand. run returns an error to report; an *exitError
// carries a specific exit code.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

// commands lists every subcommand. Each lives in its own file.
func commands() []command {
	return []command{
		{"check", "decide whether to trust a site's certificate: own probe, notaries, policy, local cache", runCheck},
		{"demo", "run an offline world of sites, notaries and a MitM, and show the MitM caught", runDemo},
		{"notary", "run a notary: init | serve | bundle", runNotary},
		{"cloud", "run a PEC cloud that proves certificates for clients: init | serve | bundle", runCloud},
		{"forwarder", "run a PEC privacy forwarder that relays sealed proofs and submissions: init | serve | bundle", runForwarder},
		{"log", "run a CT log: init | serve | add | import | build | audit", runLog},
		{"revocation", "run a revocation authority: init | serve | add-crl | add-serials | publish", runRevocation},
		{"prover", "serve CT and revocation proofs from synced trees: serve", runProver},
		{"probe", "fetch a TLS server's certificate chain with phase timings", runProbe},
		{"pec", "fetch a URL through the PEC dialer, the server's chain proved by the cloud: get", runPEC},
		{"obc", "origin-bound client certificates: get | list | forget | serve", runOBC},
		{"pec-proxy", "serve an HTTP backend over TLS as a PEC server: forward each chain to the client's cloud", runPECProxy},
		{"overhead", "measure what HTTPS costs over HTTP for whole page downloads", runOverhead},
		{"scan", "collect the certificate chains of a list of sites (resumable, JSON lines)", runScan},
		{"verify", "verify one certificate chain with every back end (Go, OpenSSL, webpki), timed per phase", runVerify},
		{"roots", "rank root CAs by sites, coverage curve, minimal trust store from scans", runRoots},
		{"replay", "replay a network's HTTPS flows as notary requests: gen | flows | synth | run | report", runReplay},
		{"bench", "measure pkie against the research papers (bench proofs, ...)", runBench},
		{"version", "print pkie's version and the revision it was built from", runVersion},
	}
}

// exitError asks Main to exit with code after printing msg (if any).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError reports bad usage: exit code 2.
func usageError(format string, a ...any) error {
	return &exitError{code: ExitUsage, msg: fmt.Sprintf(format, a...)}
}

// negative reports a completed check whose answer is no: exit code 1, no
// extra message (the command already printed its result).
func negative() error { return &exitError{code: ExitNegative} }

// Main runs the subcommand named by args[0] and returns the process exit code.
func Main(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			return Main(ctx, env, []string{args[1], "--help"})
		}
		printHelp(env.Stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, env, args[1:])
		if err == nil {
			return ExitOK
		}
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		// An error may repeat what a remote party or a file chose (a
		// server's certificate names, a peer's message, a bundle's name):
		// escaped, it stays one line and cannot drive the terminal.
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintf(env.Stderr, "pkie %s: %s\n", c.name, termtext.Escape(ee.msg))
			}
			return ee.code
		}
		// Errors of the command's own package already name it
		// ("cloud: …"); the prefix is said once.
		fmt.Fprintf(env.Stderr, "pkie %s: %s\n", c.name, termtext.Escape(strings.TrimPrefix(err.Error(), c.name+": ")))
		return ExitUsage
	}
	fmt.Fprintf(env.Stderr, "pkie: unknown command %q; run \"pkie help\" for the list\n", args[0])
	return ExitUsage
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "pkie trusts a TLS certificate on more evidence than one CA signature.")
	fmt.Fprintln(w, "\nUsage: pkie <command> [flags] [args]\n\nCommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun \"pkie <command> --help\" for a command's flags.")
}

// newFlags returns a FlagSet that reports errors instead of exiting and
// prints usage to env.Stderr.
func newFlags(env *Env, name, usage string) *flag.FlagSet {
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

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "help" }

// parseFlags parses args, allowing flags after positional arguments
// ("pkie check example.com --json"), which people type all the time. A bad
// flag is named on one line with a pointer to -h, not followed by the whole
// usage; -h prints the usage. A negative duration is refused for every
// flag: none of pkie's durations means anything below zero.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
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
			return nil, usageError("%s (run \"%s -h\" for the flags)", msg, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			var neg error
			fs.Visit(func(f *flag.Flag) {
				if g, ok := f.Value.(flag.Getter); ok && neg == nil {
					if d, ok := g.Get().(time.Duration); ok && d < 0 {
						neg = usageError("--%s %s is negative", f.Name, d)
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

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// splitHostPort parses HOST[:PORT] with a default port, accepting bracketed
// IPv6 literals ("[::1]:8443") and bare ones without a port ("::1"). Any
// other text with more than one colon outside brackets is refused: taken
// whole as a host name, "a.test:443.b.test:443" would be looked up in DNS.
func splitHostPort(s string, defPort int) (string, int, error) {
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		h, p, ok := strings.Cut(s[1:], "]")
		if !ok || (p != "" && !strings.HasPrefix(p, ":")) {
			return "", 0, fmt.Errorf("malformed address %q", s)
		}
		host, port = h, strings.TrimPrefix(p, ":")
	case strings.Count(s, ":") == 1:
		host, port, _ = strings.Cut(s, ":")
	case strings.Contains(s, ":"):
		if a, err := netip.ParseAddr(s); err != nil || !a.Is6() {
			return "", 0, fmt.Errorf("%q has more than one colon: want HOST or HOST:PORT, with an IPv6 address in brackets when a port follows ([2001:db8::1]:443)", s)
		}
	}
	if host == "" {
		return "", 0, fmt.Errorf("empty host in %q", s)
	}
	if port == "" {
		return host, defPort, nil
	}
	n, err := parsePort(port)
	return host, n, err
}

func parsePort(p string) (int, error) {
	n := 0
	if p == "" || len(p) > 5 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return n, nil
}

// oneTarget reads the single HOST[:PORT] argument of check and probe
// (port 443 by default), or returns a usage error.
func oneTarget(pos []string) (string, int, error) {
	if len(pos) != 1 {
		return "", 0, usageError("want exactly one HOST[:PORT], got %d arguments", len(pos))
	}
	if strings.Contains(pos[0], "://") {
		return "", 0, usageError("%q is a URL: give HOST[:PORT], not a URL", pos[0])
	}
	host, port, err := splitHostPort(pos[0], 443)
	if err != nil {
		return "", 0, usageError("%v", err)
	}
	return host, port, nil
}

// checkOutput reports, before a long run, whether a file can be created at
// path (for a --plot PREFIX, path is the prefix): its directory must exist
// and be writable. A run whose results are then lost to a typo in an
// output path wastes the run.
func checkOutput(flagName, path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return usageError("%s %s: directory %s: %v", flagName, path, dir, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return usageError("%s %s: %s is not a directory", flagName, path, dir)
	}
	f, err := os.CreateTemp(dir, ".pkie-write-test-*")
	if err != nil {
		return usageError("%s %s: cannot write in %s: %v", flagName, path, dir, errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// makeOutDir creates dir, parents included, for a flag naming a directory
// of outputs (as pkie replay report --plots does), and checks that files
// can be written in it: a run must not be lost to a directory not made yet.
func makeOutDir(flagName, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usageError("%s %s: %v", flagName, dir, err)
	}
	return checkOutput(flagName, filepath.Join(dir, "plot"))
}

// optionError turns a library's *option.Error into a usage error naming
// the command's flags (names maps Options fields to them); other errors
// pass as they are.
func optionError(err error, names map[string]string) error {
	var oe *option.Error
	if errors.As(err, &oe) {
		return usageError("%s", oe.Rename(names))
	}
	return err
}
