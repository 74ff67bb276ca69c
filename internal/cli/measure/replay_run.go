package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/replay/driver"
	"github.com/pkie/pkie/probe"
)

// replayRunSummary is what pkie replay run --json prints.
type replayRunSummary struct {
	Record   string           `json:"record"`
	API      string           `json:"api"`
	Notaries []string         `json:"notaries"`
	End      replay.RunEnd    `json:"end"`
	Results  int64            `json:"results"`
	Counts   map[string]int64 `json:"counts"`
}

// replayRunFlags names driver.Setup's fields as replay run's flags do.
var replayRunFlags = map[string]string{
	"Local": "--local-notaries", "Bundles": "--notary-bundle", "API": "--api", "Conns": "--conns",
	"Speedup": "--speedup", "Timeout": "--timeout", "From": "--from", "Until": "--until",
	"MaxInFlight": "--max-in-flight", "Hosts": "--hosts", "ProbeTimeout": "--probe-timeout",
	"NotaryProbes": "--notary-probes", "NotaryQueue": "--notary-queue", "NotaryRequests": "--notary-requests", "Dead": "--dead",
}

func replayRun(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "replay run", "[flags] SCHEDULE --out RECORD")
	out := fs.String("out", "", "write the run record to this `FILE` (required)")
	notaryMode := fs.String("notary", "", "\"local\": replay against notaries run in this process, probing a synthetic world of the schedule's targets")
	localN := fs.Int("local-notaries", 1, "with --notary local, how many local notaries (each request goes to every one)")
	var bundles command.StringList
	fs.Var(&bundles, "notary-bundle", "bundle `FILE` of a remote notary to replay against (repeatable; each request goes to every one)")
	api := fs.String("api", "convergence", "notary API: convergence (as the paper's clients) or v1")
	speedup := fs.Float64("speedup", 1, "replay this many times faster than the trace")
	timeout := fs.Duration("timeout", driver.DefaultTimeout, "the client's timeout per request")
	from := fs.Duration("from", 0, "replay from this trace time (offset from the schedule's start)")
	until := fs.Duration("until", 0, "replay up to this trace time (0: to the end)")
	hosts := fs.Int("hosts", driver.DefaultHosts, "loopback source addresses (127.0.1.1 …) the schedule's clients are spread over, when the notaries are on loopback")
	maxInFlight := fs.Int("max-in-flight", driver.DefaultMaxInFlight, "most requests in flight; a request due past it is recorded not_sent")
	probeTimeout := fs.Duration("probe-timeout", probe.DefaultTimeout, "with --notary local, the notaries' probe timeout (2 s, as in Forced Perspectives §3.2)")
	nProbes := fs.Int("notary-probes", 0, "with --notary local, the notaries' probes in flight (0: the notary's default, 64); size it to what the machine can probe at once")
	nQueue := fs.Int("notary-queue", 0, "with --notary local, probes waiting for a slot before the notary answers 503 overloaded (0: the notary's default, 4 × --notary-probes)")
	nRequests := fs.Int("notary-requests", 0, "with --notary local, probing requests handled at once before the notary answers 503 overloaded (0: the notary's default, 4096)")
	connMode := fs.String("conns", replay.ConnsReuse, "how requests use connections to the notaries: reuse (pooled HTTP/2 connections per source address) or fresh (a new TLS connection per request, so the notaries' bytes include a handshake each, as for a client checking one certificate per connection)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (replayer, notaries, world) to `FILE`")
	deadMode := fs.String("dead", "refuse", "with --notary local, what the world's dead targets do: refuse (connections refused: the probe fails at once) or silent (accepted, never answered: the probe times out, as at a server that no longer answers)")
	force := fs.Bool("force", false, "overwrite --out if it exists (never when it is the schedule or a bundle)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	asJSON := fs.Bool("json", false, "print the run's end and its results by outcome as JSON")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return command.UsageError("want one SCHEDULE file; run \"pkie replay run -h\"")
	case pos[0] == "-":
		return command.UsageError("the schedule must be a file: it is read twice (its targets first)")
	case *out == "":
		return command.UsageError("--out RECORD is required")
	case (*notaryMode == "") == (len(bundles) == 0):
		return command.UsageError("want --notary local or one or more --notary-bundle FILE, not both")
	case *notaryMode != "" && *notaryMode != "local":
		return command.UsageError("--notary %q: the only in-process notary is \"local\"; remote notaries are given by --notary-bundle", *notaryMode)
	case *notaryMode == "" && (*nProbes != 0 || *nQueue != 0 || *nRequests != 0):
		return command.UsageError("--notary-probes, --notary-queue and --notary-requests size a local notary: give --notary local")
	}
	setup := driver.Setup{
		Bundles: bundles, API: *api, Conns: *connMode, Speedup: *speedup, Timeout: *timeout,
		From: *from, Until: *until, MaxInFlight: *maxInFlight, Hosts: *hosts,
		ProbeTimeout: *probeTimeout, NotaryProbes: *nProbes, NotaryQueue: *nQueue, NotaryRequests: *nRequests, Dead: *deadMode,
	}
	if *notaryMode == "local" {
		setup.Local = *localN
	} else if *localN < 1 || *localN > 16 {
		return command.UsageError("--local-notaries must be 1 to 16") // checked whether used or not, as always
	}
	if err := command.OptionError(setup.Validate(), replayRunFlags); err != nil {
		return err
	}
	if err := checkRecordOut(*out, *force, append([]string{pos[0]}, bundles...)); err != nil {
		return err
	}
	if err := command.CheckOutput("--out", *out); err != nil {
		return err
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	// First pass: the targets and the summary, which also proves the
	// schedule whole before a long run starts.
	targets, lastT, err := scheduleRest(env, pos[0])
	if err != nil {
		return err
	}
	in, closeIn, err := openTrace(env, pos[0], nil)
	if err != nil {
		return err
	}
	defer closeIn()
	sr, err := replay.NewScheduleReader(in)
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	opt := driver.Options{Schedule: sr, Header: replay.RunHeader{Schedule: pos[0], ScheduleHeader: sr.Header, API: *api, Conns: *connMode}}
	stop, err := setup.Prepare(targets, &opt, func(w string) { fmt.Fprintf(env.Stderr, "pkie replay run: %s\n", w) })
	defer stop()
	if err != nil {
		return err
	}

	// The record is written in place, not renamed into place at the end:
	// a run killed outright keeps what it recorded, which report reads.
	// Without --force, O_EXCL keeps the check above from racing another
	// writer.
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if fi, err := os.Stat(*out); err == nil && !fi.Mode().IsRegular() {
		// A device or pipe (/dev/null for a throwaway run): nothing
		// to overwrite.
		flags = os.O_WRONLY
	} else if *force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(*out, flags, 0o666)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return command.UsageError("--out %s exists; give --force to overwrite it", *out)
		}
		return err
	}
	defer f.Close()
	opt.Out = f
	// Progress counts to the last request's time: the summary's seconds
	// run on to the end of the last flow.
	total := lastT
	if *until > 0 && *until < total {
		total = *until
	}
	// The falling-behind warning is printed even with --quiet.
	rp := &runProgress{w: env.Stderr, total: total, quiet: *quiet}
	opt.Progress = rp.show
	sum, runErr := driver.Run(ctx, opt)
	if err := f.Close(); err != nil && runErr == nil {
		runErr = err
	}
	interrupted := runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err())
	if runErr != nil && !interrupted {
		return runErr
	}
	if *asJSON {
		rs := replayRunSummary{Record: *out, API: *api, End: sum.End, Results: sum.Results, Counts: sum.Counts}
		for _, t := range opt.Targets {
			rs.Notaries = append(rs.Notaries, t.Name())
		}
		if err := command.WriteJSON(env.Stdout, rs); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Stderr, "pkie replay run: %d results in %s (trace time %s reached, max lag %s, peak %d in flight): %s\n",
			sum.Results, sum.End.Wall.Round(time.Millisecond), sum.End.Reached.Round(time.Millisecond),
			sum.End.MaxLag.Round(time.Millisecond), sum.End.PeakInFlight, outcomeMix(sum.Counts))
		if sum.Late > 0 {
			fmt.Fprintf(env.Stderr, "pkie replay run: %d results left a trace second or more behind their time (max lag %s): the replayer fell behind, so results are not a faithful replay\n",
				sum.Late, sum.End.MaxLag.Round(time.Millisecond))
		}
		if n := sum.Counts[replay.OutcomeNotSent]; n > 0 {
			fmt.Fprintf(env.Stderr, "pkie replay run: %d requests were not sent (the bound of %d in flight was reached): not a faithful replay\n", n, *maxInFlight)
		}
	}
	if interrupted {
		return fmt.Errorf("interrupted at trace time %s; %s ends with an interrupted run", sum.End.Reached.Round(time.Millisecond), *out)
	}
	return nil
}

// checkRecordOut refuses a run record path that would destroy an input
// (the schedule or a notary bundle, by path or as the same file through
// another name) or, without force, any existing regular file: a run record is
// written in place from the start, so a mistyped --out would otherwise be
// gone before the run showed anything.
func checkRecordOut(out string, force bool, inputs []string) error {
	oi, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return command.UsageError("--out %s: %v", out, errors.Unwrap(err))
	}
	for _, in := range inputs {
		if ii, err := os.Stat(in); err == nil && os.SameFile(oi, ii) {
			return command.UsageError("--out %s is %s, an input of the run: it would be overwritten", out, in)
		}
	}
	if oi.IsDir() {
		return command.UsageError("--out %s is a directory", out)
	}
	if !force && oi.Mode().IsRegular() {
		return command.UsageError("--out %s exists; give --force to overwrite it", out)
	}
	return nil
}

// scheduleRest reads a whole schedule, checking it, and returns its
// targets and its last request's time.
func scheduleRest(env *command.Env, name string) ([]replay.Target, time.Duration, error) {
	in, closeIn, err := openTrace(env, name, nil)
	if err != nil {
		return nil, 0, err
	}
	defer closeIn()
	sr, err := replay.NewScheduleReader(in)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", name, err)
	}
	var last time.Duration
	for {
		r, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", name, err)
		}
		last = r.T
	}
	t, _, err := sr.Rest()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", name, err)
	}
	return t, last, nil
}

func outcomeMix(c map[string]int64) string {
	order := []string{replay.OutcomeOK, replay.OutcomeConflict, replay.OutcomeUnavailable, replay.OutcomeStatus,
		replay.OutcomeConnError, replay.OutcomeTimeout, replay.OutcomeNotSent}
	var parts []string
	seen := map[string]bool{}
	for _, k := range order {
		seen[k] = true
		if c[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
		}
	}
	var rest []string
	for k := range c {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	if len(parts) == 0 {
		return "none yet"
	}
	return strings.Join(parts, ", ")
}

// runProgress prints a replay's progress lines, and warns when the
// replayer falls behind.
type runProgress struct {
	w     io.Writer
	total time.Duration
	quiet bool

	warnedLate int64         // Progress.Late at the last warning
	warnedAt   time.Duration // and its wall time
}

// lateWarnEvery spaces the falling-behind warnings.
const lateWarnEvery = 10 * time.Second

func (rp *runProgress) show(p driver.Progress) {
	if !rp.quiet {
		printRunProgress(rp.w, p, rp.total)
	}
	if p.Late > rp.warnedLate && (rp.warnedLate == 0 || p.Wall-rp.warnedAt >= lateWarnEvery) {
		fmt.Fprintf(rp.w, "pkie replay run: warning: the replayer is falling behind: %d results so far left a trace second (%s of wall time) or more late, up to %s: results are not a faithful replay\n",
			p.Late, p.TraceSecond.Round(time.Microsecond), p.MaxLag.Round(time.Millisecond))
		rp.warnedLate, rp.warnedAt = p.Late, p.Wall
	}
}

// printRunProgress prints one progress line. Its lags are the recorded
// ones (Result.Sent behind the due time), the largest of the results that
// ended in the last interval and of all so far: what report will show.
func printRunProgress(w io.Writer, p driver.Progress, total time.Duration) {
	of := ""
	if total > 0 {
		of = " of " + total.Round(time.Second).String()
	}
	rate := 0.0
	if p.Interval > 0 {
		rate = float64(p.Sent) / p.Interval.Seconds()
	}
	fmt.Fprintf(w, "pkie replay run: trace %s%s at wall %s, %.0f sent/s, %d in flight, lag %s (max %s); %s\n",
		p.Reached.Truncate(time.Second), of, p.Wall.Truncate(time.Second), rate, p.InFlight,
		p.RecentMaxLag.Round(time.Millisecond), p.MaxLag.Round(time.Millisecond), outcomeMix(p.Counts))
}
