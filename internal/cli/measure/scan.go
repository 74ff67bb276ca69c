package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/scan"
	"github.com/pkie/pkie/probe"
)

// ScanSummary is pkie scan's --json summary.
type ScanSummary struct {
	scan.Summary
	Out           string   `json:"out"`
	Vantage       string   `json:"vantage"`
	ListMalformed int      `json:"list_malformed"`
	ListProblems  []string `json:"list_problems,omitempty"`
	Resumed       int      `json:"resumed_records"` // records already in --out
	OutMalformed  int      `json:"out_malformed,omitempty"`
	OutTruncated  bool     `json:"out_truncated,omitempty"`
}

func Scan(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "scan", "[flags] SITELIST (rank,domain CSV or one domain per line; - for stdin)")
	out := fs.String("out", "", "append JSON-lines records to FILE, skipping sites it already records (default: stdout, no resumption)")
	limit := fs.Int("limit", 0, "scan only the first N sites of the list")
	conc := fs.Int("concurrency", 50, "sites probed at once")
	timeout := fs.Duration("timeout", 5*time.Second, "per-attempt connect + handshake timeout")
	retries := fs.Int("retries", 1, "retries for a failed site (0 for none)")
	backoff := fs.Duration("backoff", 500*time.Millisecond, "wait before the first retry, doubled each time")
	rate := fs.Float64("rate", 0, "at most this many connection attempts per second (0: no limit)")
	port := fs.Int("port", 443, "TCP port to scan")
	vantage := fs.String("vantage", "local", "label for where this scan runs (compare vantages with pkie roots)")
	retryFailed := fs.Bool("retry-failed", false, "when resuming, scan sites recorded with an error again")
	allowPrivate := fs.Bool("allow-private", false, "allow loopback, private and other non-public addresses")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	resolve := command.AddResolveFlags(fs, "a site, for testing", true)
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return command.UsageError("want exactly one site list, got %d arguments", len(pos))
	}
	switch {
	case *conc < 1 || *conc > 10000:
		return command.UsageError("--concurrency must be between 1 and 10000")
	case *limit < 0:
		return command.UsageError("--limit must not be negative")
	case *retries < 0 || *retries > 10:
		return command.UsageError("--retries must be between 0 and 10")
	case *port < 1 || *port > 65535:
		return command.UsageError("--port must be between 1 and 65535")
	case *rate < 0:
		return command.UsageError("--rate must not be negative")
	case *timeout <= 0:
		return command.UsageError("--timeout must be positive")
	}
	popts := probe.Options{Timeout: *timeout, AllowPrivate: *allowPrivate, Vantage: *vantage}
	if !resolve.Empty() {
		popts.Lookup = resolve.Lookup
	}

	listName := pos[0]
	var list io.Reader = env.Stdin
	total := 0
	if listName != "-" {
		f, err := os.Open(listName)
		if err != nil {
			return command.UsageError("site list: %v", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			// A first pass for the ETA, cheap next to the scan itself,
			// which also refuses a list with nothing to scan before --out
			// is created.
			var bad []string
			cl := scan.NewListReader(f)
			cl.Limit = *limit
			cl.OnMalformed = func(e *scan.LineError) {
				if len(bad) < maxListProblems {
					bad = append(bad, e.Error())
				}
			}
			for {
				_, err := cl.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return fmt.Errorf("reading %s: %w", listName, err)
				}
				total++
			}
			if total == 0 {
				for _, b := range bad {
					fmt.Fprintf(env.Stderr, "pkie scan: skipping %s:%s\n", listName, b)
				}
				return noSitesError(listName, cl.Malformed())
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
		}
		list = f
	}
	sum := ScanSummary{Out: *out, Vantage: *vantage}
	lr := scan.NewListReader(list)
	lr.Limit = *limit
	lr.OnMalformed = func(e *scan.LineError) {
		if len(sum.ListProblems) < maxListProblems {
			sum.ListProblems = append(sum.ListProblems, fmt.Sprintf("%s:%s", listName, e.Error()))
			fmt.Fprintf(env.Stderr, "pkie scan: skipping %s:%s\n", listName, e.Error())
		}
	}

	o := scan.Options{
		Probe: popts, Port: *port, Concurrency: *conc, Retries: *retries, Backoff: *backoff,
		Rate: *rate, Total: total,
	}
	if *retries == 0 {
		o.Retries = -1
	}
	if !*quiet {
		o.Progress = env.Stderr
	}
	var w io.Writer = env.Stdout
	report := env.Stdout
	if *out != "" {
		f, done, st, err := scan.OpenResume(*out, *retryFailed)
		if err != nil {
			return err
		}
		defer f.Close()
		sum.Resumed, sum.OutMalformed, sum.OutTruncated = st.Records, st.Malformed, st.Truncated
		for _, p := range st.Problems {
			fmt.Fprintf(env.Stderr, "pkie scan: %s: %s\n", *out, p)
		}
		if done.Len() > 0 {
			fmt.Fprintf(env.Stderr, "pkie scan: resuming: %d sites already in %s\n", done.Len(), *out)
			o.Skip = done.Has
		}
		w = f
	} else {
		report = env.Stderr // stdout carries the records
	}
	s, runErr := scan.Run(ctx, lr, w, o)
	sum.Summary = s
	sum.ListMalformed = lr.Malformed()
	if sum.ListMalformed > len(sum.ListProblems) {
		fmt.Fprintf(env.Stderr, "pkie scan: %d malformed list lines skipped in all\n", sum.ListMalformed)
	}
	if *asJSON {
		if err := command.WriteJSON(report, sum); err != nil {
			return err
		}
	} else {
		printScanSummary(report, &sum)
	}
	if errors.Is(runErr, context.Canceled) {
		return &command.ExitError{Code: command.ExitUsage, Msg: "interrupted; run the same command again to resume"}
	}
	if runErr == nil && sum.Sites == 0 {
		// A list read from a pipe is only known empty once read.
		return noSitesError(listName, sum.ListMalformed)
	}
	return runErr
}

// maxListProblems bounds the malformed list lines pkie scan names; the
// rest are counted.
const maxListProblems = 20

// noSitesError refuses a site list without one valid entry: a scan of
// nothing that exits 0 hides a wrong file or format from the script that
// ran it.
func noSitesError(list string, malformed int) error {
	if list == "-" {
		list = "the site list on stdin"
	}
	if malformed > 0 {
		return command.UsageError("%s holds no valid site: all %d entries are malformed (want rank,domain CSV or one domain per line)", list, malformed)
	}
	return command.UsageError("%s holds no site (want rank,domain CSV or one domain per line)", list)
}

func printScanSummary(w io.Writer, s *ScanSummary) {
	fmt.Fprintf(w, "sites      %d in list (%d malformed lines skipped), %d already recorded, %d scanned\n",
		s.Sites, s.ListMalformed, s.Skipped, s.Scanned)
	fmt.Fprintf(w, "answered   %d with a chain, %d failed (%d attempts)\n", s.OK, s.Failed, s.Attempts)
	if len(s.Errors) > 0 {
		var parts []string
		for _, k := range []string{"timeout", "resolve", "connect", "handshake", "forbidden", "other"} {
			if n := s.Errors[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, n))
			}
		}
		fmt.Fprintf(w, "failures   %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "rate       %.1f sites/s over %s\n", s.PerSecond, s.Elapsed.Round(time.Millisecond))
	if s.Out != "" {
		fmt.Fprintf(w, "records    %s (vantage %q)\n", s.Out, s.Vantage)
	}
}
