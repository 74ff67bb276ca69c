package measure

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/replay/gen"
)

// replayGenSummary is what pkie replay gen reports when done.
type replayGenSummary struct {
	Format   string        `json:"format"`
	Seed     uint64        `json:"seed"`
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration_ns"`
	Clients  int           `json:"clients"`
	// Flows are the flows written; SNI those with a server name;
	// Resolvable those whose server address has a PTR name.
	Flows      int64 `json:"flows"`
	SNI        int64 `json:"sni"`
	Resolvable int64 `json:"resolvable"`
	// Unanswered flows went to dead hosts.
	Unanswered int64  `json:"unanswered"`
	Bytes      uint64 `json:"bytes"`
	// Hosts and DeadHosts are the distinct server names the flows reached.
	Hosts       int      `json:"hosts"`
	DeadHosts   int      `json:"dead_hosts"`
	MapEntries  int      `json:"map_entries,omitempty"`
	Files       []string `json:"files"`
	Interrupted bool     `json:"interrupted,omitempty"`
}

func replayGen(ctx context.Context, env *command.Env, args []string) error {
	def := gen.DefaultOptions()
	fs := command.NewFlags(env, "replay gen", "--out FILE [flags]")
	flows := fs.Int64("flows", 0, fmt.Sprintf("flows to make (default: the paper's %d an hour, times --scale, over --duration)", gen.PaperFlows))
	duration := fs.Duration("duration", def.Duration, "the trace's length; without --flows, the paper's rate of flows over it")
	seed := fs.Uint64("seed", def.Seed, "the seed: the same flags make the same trace")
	scale := fs.Float64("scale", 1, "a network this many times the paper's campus: flows and clients scaled, the web's hosts not")
	clients := fs.Int("clients", 0, "client addresses (default: the paper's campus, times --scale)")
	start := fs.String("start", def.Start.Format(time.RFC3339), "the trace's start, RFC 3339")
	format := fs.String("format", replay.FormatJSONL, "trace format: jsonl, nfdump (nfdump 1.7 -o csv), zeek (conn.log, with --ssl-out), pcap or pcapng (handshakes and ClientHellos; data packets captured to their headers)")
	out := fs.String("out", "", "the trace file (- for stdout)")
	sslOut := fs.String("ssl-out", "", "with --format zeek: the ssl.log naming the connections")
	mapOut := fs.String("map", "", "also write the reverse-DNS map of the trace's resolvable addresses, \"ADDR NAME\" lines")
	noSNI := fs.Bool("no-sni", false, "leave flows without server names, as the paper's netflow was")
	deadAnswered := fs.Bool("dead-answered", false, "let flows to dead hosts look answered, as the paper's did when captured (the trace then cannot say they are dead)")
	optFile := fs.String("options", "", "a JSON file of generator options (every shape parameter; see --print-options) over the paper's defaults; flags given override it")
	printOpts := fs.Bool("print-options", false, "print the options the other flags make, as an --options file, and make no trace")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return command.UsageError("unexpected argument %q; run \"pkie replay gen -h\"", pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	base := def
	if *optFile != "" {
		f, err := os.Open(*optFile)
		if err != nil {
			return command.UsageError("--options: %v", err)
		}
		base, err = gen.ReadOptions(f)
		f.Close()
		if err != nil {
			return command.UsageError("--options %s: %v", *optFile, err)
		}
	}
	if !set["duration"] {
		*duration = base.Duration
	}
	if !set["seed"] {
		*seed = base.Seed
	}
	o := base
	switch {
	case *scale <= 0 || *scale > 100:
		return command.UsageError("--scale %v: want a factor above 0, at most 100", *scale)
	case *duration <= 0:
		return command.UsageError("--duration must be positive")
	case set["flows"] && *flows < 0:
		return command.UsageError("--flows must not be negative")
	case set["clients"] && *clients < 1:
		return command.UsageError("--clients must be at least 1")
	}
	o = o.Scaled(*scale)
	if !set["flows"] {
		// The paper's rate, over the chosen duration: the first D of the
		// hour, by the same clients.
		*flows = int64(float64(o.Flows) * float64(*duration) / float64(base.Duration))
	}
	o.Flows, o.Duration, o.Seed = *flows, *duration, *seed
	if set["clients"] {
		o.Clients = *clients
	}
	if set["start"] {
		if o.Start, err = time.Parse(time.RFC3339Nano, *start); err != nil {
			return command.UsageError("--start %q: want RFC 3339 (%s)", *start, def.Start.Format(time.RFC3339))
		}
	}
	o.NoSNI = o.NoSNI || *noSNI
	o.DeadUnanswered = o.DeadUnanswered && !*deadAnswered
	if *printOpts {
		if _, err := gen.New(o); err != nil {
			return command.UsageError("%v", err)
		}
		return command.WriteJSON(env.Stdout, o)
	}
	switch *format {
	case replay.FormatJSONL, replay.FormatNfdump, replay.FormatPCAP, gen.FormatPCAPNG:
		if *sslOut != "" {
			return command.UsageError("--ssl-out goes with --format zeek")
		}
	case replay.FormatZeek:
		if *sslOut == "" && !*noSNI {
			return command.UsageError("--format zeek writes the server names to an ssl.log: give --ssl-out FILE (or --no-sni)")
		}
		if *out == "-" {
			return command.UsageError("--format zeek writes two files: give --out FILE")
		}
	default:
		return command.UsageError("--format %q: want jsonl, nfdump, zeek, pcap or pcapng", *format)
	}
	if *out == "" {
		return command.UsageError("want --out FILE (or --out - for stdout); run \"pkie replay gen -h\"")
	}
	paths := map[string]string{}
	for _, p := range []struct{ flag, path string }{{"--out", *out}, {"--ssl-out", *sslOut}, {"--map", *mapOut}} {
		if p.path == "" {
			continue
		}
		abs, _ := filepath.Abs(p.path)
		if other, dup := paths[abs]; dup {
			return command.UsageError("%s and %s name the same file, %s", other, p.flag, p.path)
		}
		paths[abs] = p.flag
		if p.path != "-" {
			if err := command.CheckOutput(p.flag, p.path); err != nil {
				return err
			}
		}
	}
	g, err := gen.New(o)
	if err != nil {
		return command.UsageError("%v", err)
	}

	// Files are written under temporary names and renamed when complete:
	// an interrupted or failed run leaves nothing half-written behind.
	var files []*pendingFile
	defer func() {
		for _, f := range files {
			f.abandon()
		}
	}()
	open := func(path string) (io.Writer, error) {
		if path == "" {
			return nil, nil
		}
		if path == "-" {
			return env.Stdout, nil
		}
		f, err := newPendingFile(path)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		return f, nil
	}
	traceW, err := open(*out)
	if err != nil {
		return err
	}
	// A nil io.Writer in an interface is not nil: pass nil itself.
	var sslW io.Writer
	if *sslOut != "" {
		if sslW, err = open(*sslOut); err != nil {
			return err
		}
	}
	w, err := gen.NewWriter(*format, traceW, sslW)
	if err != nil {
		return err
	}

	sum := replayGenSummary{Format: *format, Seed: o.Seed, Start: o.Start, Duration: o.Duration, Clients: o.Clients}
	began, last := time.Now(), time.Now()
	for {
		if sum.Flows%4096 == 0 {
			if ctx.Err() != nil {
				sum.Interrupted = true
				break
			}
			if now := time.Now(); now.Sub(last) >= time.Second {
				last = now
				fmt.Fprintf(env.Stderr, "pkie replay gen: %d of %d flows (%.0f%%), %.0f/s\n",
					sum.Flows, o.Flows, 100*float64(sum.Flows)/float64(max(o.Flows, 1)), float64(sum.Flows)/now.Sub(began).Seconds())
			}
		}
		f, err := g.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := w.Write(f); err != nil {
			return err
		}
		sum.Flows++
		if f.ServerName != "" {
			sum.SNI++
		}
		if _, ok := g.Name(f.Server); ok {
			sum.Resolvable++
		}
		if f.PacketsIn == 0 {
			sum.Unanswered++
		}
		sum.Bytes += f.BytesOut + f.BytesIn
	}
	if sum.Interrupted {
		// The deferred abandon removes what was written.
		return fmt.Errorf("interrupted after %d of %d flows; nothing written", sum.Flows, o.Flows)
	}
	if err := w.Close(); err != nil {
		return err
	}
	if *mapOut != "" {
		mw, err := open(*mapOut)
		if err != nil {
			return err
		}
		bw := bufio.NewWriter(mw)
		for a, name := range g.TraceMap() {
			fmt.Fprintf(bw, "%s %s\n", a, name)
			sum.MapEntries++
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("--map %s: %w", *mapOut, err)
		}
	}
	for _, f := range files {
		if err := f.commit(); err != nil {
			return err
		}
		sum.Files = append(sum.Files, f.path)
	}
	sum.Hosts, sum.DeadHosts = g.Reached()

	if *asJSON {
		rep := env.Stdout
		if *out == "-" {
			rep = env.Stderr
		}
		return command.WriteJSON(rep, sum)
	}
	pct := func(n int64) float64 { return 100 * float64(n) / float64(max(sum.Flows, 1)) }
	fmt.Fprintf(env.Stderr, "pkie replay gen: %d flows (seed %d) over %s from %d clients: %d with SNI, %d (%.1f%%) resolvable, %d (%.1f%%) unanswered; %.3g bytes; %d hosts reached, %d of them dead\n",
		sum.Flows, sum.Seed, sum.Duration, sum.Clients, sum.SNI, sum.Resolvable, pct(sum.Resolvable), sum.Unanswered, pct(sum.Unanswered),
		float64(sum.Bytes), sum.Hosts, sum.DeadHosts)
	return nil
}

// pendingFile is an output file written under a temporary name in its
// directory and renamed to its own on commit.
type pendingFile struct {
	path string
	f    *os.File
	w    *bufio.Writer
	done bool
}

func newPendingFile(path string) (*pendingFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return nil, err
	}
	return &pendingFile{path: path, f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

func (p *pendingFile) Write(b []byte) (int, error) { return p.w.Write(b) }

func (p *pendingFile) commit() error {
	if err := p.w.Flush(); err != nil {
		return fmt.Errorf("%s: %w", p.path, err)
	}
	// CreateTemp's files are the owner's alone; the output is a trace like
	// any other (the umask still applies to what os.Create would make,
	// so take it as the common 022).
	if err := p.f.Chmod(0o644); err != nil {
		return fmt.Errorf("%s: %w", p.path, err)
	}
	if err := p.f.Close(); err != nil {
		return fmt.Errorf("%s: %w", p.path, err)
	}
	if err := os.Rename(p.f.Name(), p.path); err != nil {
		return err
	}
	p.done = true
	return nil
}

// abandon removes the file unless it was committed.
func (p *pendingFile) abandon() {
	if !p.done {
		p.f.Close()
		os.Remove(p.f.Name())
	}
}
