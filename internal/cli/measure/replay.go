package measure

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/replay"
)

func Replay(ctx context.Context, env *command.Env, args []string) error {
	// One line per subcommand, in pipeline order: (synthetic) trace, flows, schedule,
	// run record, report.
	subs := []struct {
		name  string
		run   func(context.Context, *command.Env, []string) error
		usage string
	}{
		{"gen", replayGen, "make a synthetic trace shaped like Forced Perspectives' hour of campus HTTPS, with its reverse-DNS map"},
		{"flows", replayFlows, "read a trace (nfdump CSV, Zeek conn.log/ssl.log, pcap, pkie JSON lines) and write its HTTPS flows as JSON lines"},
		{"synth", replaySynth, "name a trace's flows, simulate each client's cache, and write the notary requests as a schedule"},
		{"run", replayRun, "replay a request schedule, open loop, against local or remote notaries and write a run record"},
		{"report", replayReport, "measure a replayed run from its record and schedule: Tables 1-3, Figures 2-5, overhead, expected delay"},
	}
	var names []string
	usage := "Usage: pkie replay SUBCOMMAND [flags]\n"
	for _, s := range subs {
		names = append(names, s.name)
		usage += fmt.Sprintf("\n  %-7s  %s", s.name, s.usage)
	}
	if len(args) > 0 && !command.IsHelp(args[0]) {
		for _, s := range subs {
			if s.name == args[0] {
				return s.run(ctx, env, args[1:])
			}
		}
		return command.UsageError("unknown subcommand %q; want %s (run \"pkie replay -h\")", args[0], strings.Join(names, ", "))
	}
	fmt.Fprintln(env.Stderr, usage)
	if len(args) > 0 {
		return nil
	}
	return command.UsageError("want a subcommand: %s", strings.Join(names, ", "))
}

// replayFlowsSummary is what pkie replay flows reports when done.
type replayFlowsSummary struct {
	Format string `json:"format"`
	replay.Stats
	Interrupted bool `json:"interrupted,omitempty"`
}

func replayFlows(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "replay flows", "[flags] TRACE|-")
	format := fs.String("format", "auto", "trace format: auto, jsonl, nfdump, zeek or pcap")
	ports := fs.String("port", "443", "server ports whose TCP flows are kept, comma-separated")
	sslLog := fs.String("zeek-ssl", "", "Zeek ssl.log (TSV or JSON) naming the conn.log's flows by uid")
	maxSNI := fs.Int("zeek-ssl-max", replay.DefaultMaxSNI, "most ssl.log server names held in memory; past it flows stay unnamed")
	out := fs.String("out", "", "write the flows to this file instead of stdout")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return command.UsageError("want one TRACE (or - for stdin); run \"pkie replay flows -h\"")
	}
	switch *format {
	case replay.FormatAuto, replay.FormatJSONL, replay.FormatNfdump, replay.FormatZeek, replay.FormatPCAP:
	default:
		return command.UsageError("--format %q: want auto, jsonl, nfdump, zeek or pcap", *format)
	}
	opt := replay.Options{MaxSNI: *maxSNI}
	for _, p := range strings.Split(*ports, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return command.UsageError("--port %q: want port numbers 1-65535, comma-separated", *ports)
		}
		opt.Ports = append(opt.Ports, uint16(n))
	}
	if *maxSNI <= 0 {
		return command.UsageError("--zeek-ssl-max must be positive")
	}

	prog := &traceProgress{ctx: ctx, w: env.Stderr, start: time.Now(), last: time.Now()}
	in, closeIn, err := openTrace(env, pos[0], prog)
	if err != nil {
		return err
	}
	defer closeIn()
	if *sslLog != "" {
		ssl, closeSSL, err := openTrace(env, *sslLog, nil)
		if err != nil {
			return err
		}
		defer closeSSL()
		opt.ZeekSSL = ssl
	}
	head, _ := in.Peek(4096)
	name := *format
	if name == replay.FormatAuto {
		name = replay.Sniff(head)
	}
	if opt.ZeekSSL != nil && name != replay.FormatZeek {
		return command.UsageError("--zeek-ssl goes with a Zeek conn.log, and %s is not one", pos[0])
	}
	r, err := replay.Open(in, name, opt)
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	prog.stats = r.Stats

	dst := env.Stdout
	var f *os.File
	if *out != "" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		defer f.Close()
		dst = f
	}
	w := replay.NewJSONLWriter(dst)
	sum := replayFlowsSummary{Format: name}
	var readErr error
	for {
		if ctx.Err() != nil {
			sum.Interrupted = true
			break
		}
		fl, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			sum.Interrupted = true
			break
		}
		if err != nil {
			readErr = fmt.Errorf("%s: %w", pos[0], err)
			break
		}
		if err := w.Write(fl); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return err
		}
	}
	sum.Stats = r.Stats()
	if !*asJSON || *out != "" {
		// (A JSON summary on stderr says it in other_link and
		// other_link_type, and keeps stderr parseable.)
		warnPackets(env.Stderr, "replay flows", pos[0], sum.Stats)
	}
	if *asJSON {
		// Flows on stdout keep stdout to themselves.
		rep := env.Stdout
		if *out == "" {
			rep = env.Stderr
		}
		if err := command.WriteJSON(rep, sum); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Stderr, "pkie replay flows: %s: %d flows read, %d kept, %d named by SNI, %d malformed\n",
			name, sum.Read, sum.Kept, sum.Named, sum.Malformed)
		if sum.FirstError != "" {
			fmt.Fprintf(env.Stderr, "pkie replay flows: first malformed record: %s\n", sum.FirstError)
		}
		if sum.NonTCP > 0 || sum.Truncated > 0 {
			fmt.Fprintf(env.Stderr, "pkie replay flows: %d packets: %d not TCP over IP, %d captured short of their length (counted in full when their headers were captured)\n",
				sum.Packets, sum.NonTCP, sum.Truncated)
		}
		if sum.SNIDropped > 0 {
			fmt.Fprintf(env.Stderr, "pkie replay flows: %d ssl.log names past --zeek-ssl-max were dropped\n", sum.SNIDropped)
		}
	}
	if readErr != nil {
		return readErr
	}
	if sum.Interrupted {
		return fmt.Errorf("interrupted: %d flows written", sum.Kept)
	}
	return nil
}

// traceProgress sits under a trace's reader and, at most once a second
// and only after the first, prints how far the read has got: it sees every
// read of the file, however few of its flows are kept. It also ends the
// read when ctx is cancelled.
type traceProgress struct {
	ctx         context.Context
	src         io.Reader
	w           io.Writer
	size, n     int64
	start, last time.Time
	stats       func() replay.Stats
	// label names the command ("replay flows" when empty); extra, if not
	// nil, adds the command's own counts to each line.
	label string
	extra func() string
}

func (p *traceProgress) Read(b []byte) (int, error) {
	if err := p.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := p.src.Read(b)
	p.n += int64(n)
	if now := time.Now(); p.stats != nil && now.Sub(p.last) >= time.Second {
		p.last = now
		st := p.stats()
		done := ""
		if p.size > 0 {
			done = fmt.Sprintf(" (%.0f%%)", 100*float64(p.n)/float64(p.size))
		}
		label, more := p.label, ""
		if label == "" {
			label = "replay flows"
		}
		if p.extra != nil {
			more = p.extra()
		}
		fmt.Fprintf(p.w, "pkie %s: %.1f MB read%s, %d flows read (%.0f/s), %d kept, %d named, %d malformed%s\n",
			label, float64(p.n)/1e6, done, st.Read, float64(st.Read)/now.Sub(p.start).Seconds(), st.Kept, st.Named, st.Malformed, more)
	}
	return n, err
}

// openTrace opens a trace file, or stdin for "-", undoing gzip (Zeek
// rotates its logs gzipped) when the bytes say so. prog, if not nil,
// watches the file's bytes.
func openTrace(env *command.Env, name string, prog *traceProgress) (*bufio.Reader, func(), error) {
	var src io.Reader = env.Stdin
	closeFn := func() {}
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		src, closeFn = f, func() { f.Close() }
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if prog != nil {
				prog.size = fi.Size()
			}
		}
	}
	if prog != nil {
		prog.src = src
		src = prog
	}
	br := bufio.NewReaderSize(src, replay.MaxLine)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			closeFn()
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		br = bufio.NewReaderSize(zr, replay.MaxLine)
	}
	return br, closeFn, nil
}

// warnPackets says, on w, why a packet trace's packets made no flow when
// the reason is the capture's rather than the traffic's: a link type pkie
// does not decode (most often a Wi-Fi monitor or a tunnel interface's
// capture), which would otherwise end in a silent count of 0 flows.
func warnPackets(w io.Writer, cmd, name string, st replay.Stats) {
	if st.OtherLink == 0 {
		return
	}
	if st.Kept == 0 {
		fmt.Fprintf(w, "pkie %s: warning: %s: no flows: %d of its %d packets have link type %s, which pkie does not read (it reads Ethernet, Linux cooked v1 and v2, raw IP and BSD loopback)\n",
			cmd, name, st.OtherLink, st.Packets, st.OtherLinkType)
		return
	}
	fmt.Fprintf(w, "pkie %s: warning: %s: %d of its %d packets were skipped for their link type, %s, which pkie does not read\n",
		cmd, name, st.OtherLink, st.Packets, st.OtherLinkType)
}
