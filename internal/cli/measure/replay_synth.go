package measure

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/replay/gen"
	"github.com/pkie/pkie/internal/replay/synth"
)

// replaySynthSummary is what pkie replay synth reports with --json: the
// schedule summary's counts without its per-second series (the schedule
// holds that), and the reverse-DNS pass's.
type replaySynthSummary struct {
	Source string   `json:"source"`
	Format string   `json:"format,omitempty"`
	Naming []string `json:"naming"`
	// Type hides the summary record's type: this is no record.
	Type string `json:"type,omitempty"`
	synth.Result
	// Seconds is the length of the per-second series in the schedule; it
	// hides the series itself.
	Seconds int `json:"seconds"`
	// RDNS counts the reverse-DNS pass, and RDNSOverMax the flows whose
	// address was past --rdns-max and was not looked up.
	RDNS        *synth.RDNSStats `json:"rdns,omitempty"`
	RDNSOverMax int64            `json:"rdns_over_max,omitempty"`
}

// traceInput is where a trace's flows come from, openable more than once
// (the reverse-DNS pass reads the trace before synthesis does).
type traceInput struct {
	env     *command.Env
	path    string
	format  string // as given; the sniffed one after the first open
	opt     replay.Options
	sslPath string
}

// open returns a reader of the trace, prog watching its bytes if not nil.
func (in *traceInput) open(prog *traceProgress) (replay.Reader, func(), error) {
	br, closeIn, err := openTrace(in.env, in.path, prog)
	if err != nil {
		return nil, nil, err
	}
	closeAll := closeIn
	opt := in.opt
	if in.sslPath != "" {
		ssl, closeSSL, err := openTrace(in.env, in.sslPath, nil)
		if err != nil {
			closeIn()
			return nil, nil, err
		}
		closeAll = func() { closeSSL(); closeIn() }
		opt.ZeekSSL = ssl
	}
	if in.format == replay.FormatAuto {
		head, _ := br.Peek(4096)
		in.format = replay.Sniff(head)
	}
	if opt.ZeekSSL != nil && in.format != replay.FormatZeek {
		closeAll()
		return nil, nil, command.UsageError("--zeek-ssl goes with a Zeek conn.log, and %s is not one", in.path)
	}
	r, err := replay.Open(br, in.format, opt)
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("%s: %w", in.path, err)
	}
	return r, closeAll, nil
}

// replaySynthFlags names synth.Limits' fields as replay synth's flags do.
var replaySynthFlags = map[string]string{
	"MaxSNI": "--zeek-ssl-max", "CacheMax": "--cache-max", "TargetsMax": "--targets-max", "MaxSpan": "--max-span",
	"RDNSRate": "--rdns-rate", "RDNSConcurrency": "--rdns-concurrency", "RDNSTimeout": "--rdns-timeout", "RDNSMax": "--rdns-max",
}

func replaySynth(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "replay synth", "[flags] TRACE|-")
	format := fs.String("format", "auto", "trace format: auto, jsonl, nfdump, zeek or pcap")
	ports := fs.String("port", "443", "server ports whose TCP flows are kept, comma-separated")
	sslLog := fs.String("zeek-ssl", "", "Zeek ssl.log (TSV or JSON) naming the conn.log's flows by uid")
	maxSNI := fs.Int("zeek-ssl-max", replay.DefaultMaxSNI, "most ssl.log server names held in memory; past it flows stay unnamed")
	naming := fs.String("name", "sni,map,rdns", "naming methods in the order tried: sni, map, rdns (map and rdns only when --map and --rdns are given)")
	mapFile := fs.String("map", "", "mapping file of \"ADDR NAME\" lines naming server addresses")
	rdns := fs.Bool("rdns", false, "name server addresses by reverse DNS, as the paper did (reads the trace twice: give a file, not stdin)")
	resolver := fs.String("resolver", "", "DNS server HOST:PORT for reverse DNS (default: the system's resolver)")
	rdnsRate := fs.Float64("rdns-rate", synth.DefaultRDNSRate, "most reverse-DNS queries a second")
	rdnsConc := fs.Int("rdns-concurrency", synth.DefaultRDNSConcurrency, "most reverse-DNS queries at once")
	rdnsTimeout := fs.Duration("rdns-timeout", synth.DefaultRDNSTimeout, "time allowed for each reverse-DNS lookup")
	rdnsCache := fs.String("rdns-cache", "", "file keeping reverse-DNS answers (and no-name answers) between runs")
	rdnsMaxAge := fs.Duration("rdns-cache-max-age", 0, "ask again about cached answers older than this (0: keep them forever)")
	rdnsMax := fs.Int("rdns-max", synth.DefaultRDNSMax, "most distinct addresses looked up; flows to addresses past it are counted and left to other methods")
	compare := fs.Bool("compare", true, "with map or rdns naming, count the flows SNI names whose address has no name (SNI recovered)")
	reorder := fs.Duration("reorder", synth.DefaultReorder, "how far out of time order flows may arrive; later ones are counted late (0: none)")
	lifetime := fs.Duration("cache-lifetime", 0, "client cache entry lifetime from its request (0: the whole trace, as in the paper)")
	cacheMax := fs.Int("cache-max", synth.DefaultCacheMax, "most client cache entries over all clients; past it the least recently used is evicted (counted)")
	targetsMax := fs.Int("targets-max", synth.DefaultTargetsMax, "most distinct (host, port) targets; past it synthesis fails")
	maxSpan := fs.Duration("max-span", synth.DefaultMaxSpan, "longest trace accepted, first flow's start to last flow's end")
	generate := fs.Bool("generate", false, "synthesise from the synthetic generator's flows (pkie replay gen's model, the paper's hour by default) instead of a TRACE; it answers reverse DNS itself and marks its dead hosts")
	genDef := gen.DefaultOptions()
	genFlows := fs.Int64("flows", 0, fmt.Sprintf("with --generate: flows to make (default: the paper's %d an hour, times --scale, over --duration)", gen.PaperFlows))
	genDuration := fs.Duration("duration", genDef.Duration, "with --generate: the trace's length")
	genSeed := fs.Uint64("seed", genDef.Seed, "with --generate: the seed; the same flags make the same schedule")
	genScale := fs.Float64("scale", 1, "with --generate: a network this many times the paper's campus (flows and clients scaled)")
	genClients := fs.Int("clients", 0, "with --generate: client addresses (default: the paper's campus, times --scale)")
	genStart := fs.String("start", genDef.Start.Format(time.RFC3339), "with --generate: the trace's start, RFC 3339")
	genNoSNI := fs.Bool("no-sni", false, "with --generate: flows without server names, as the paper's netflow was")
	genDeadAnswered := fs.Bool("dead-answered", false, "with --generate: flows to dead hosts look answered (then only the generator's own dead set marks them)")
	out := fs.String("out", "", "write the schedule to this file instead of stdout")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	genFlags := []string{"flows", "duration", "seed", "scale", "clients", "start", "no-sni", "dead-answered"}
	var g *gen.Generator
	if *generate {
		if len(pos) != 0 {
			return command.UsageError("--generate makes its own flows: no TRACE (%q)", pos[0])
		}
		if *rdns {
			return command.UsageError("--rdns goes with a TRACE, not --generate: the generator answers reverse DNS itself, from its PTR records")
		}
		for _, f := range []string{"format", "port", "zeek-ssl", "zeek-ssl-max"} {
			if set[f] {
				return command.UsageError("--%s goes with a TRACE, not --generate", f)
			}
		}
		if g, err = newSynthGenerator(genDef, set, *genFlows, *genDuration, *genSeed, *genScale, *genClients, *genStart, *genNoSNI, *genDeadAnswered); err != nil {
			return err
		}
		pos = []string{"generator"}
	} else {
		for _, f := range genFlags {
			if set[f] {
				return command.UsageError("--%s goes with --generate", f)
			}
		}
		if len(pos) != 1 {
			return command.UsageError("want one TRACE (or - for stdin), or --generate; run \"pkie replay synth -h\"")
		}
	}
	switch *format {
	case replay.FormatAuto, replay.FormatJSONL, replay.FormatNfdump, replay.FormatZeek, replay.FormatPCAP:
	default:
		return command.UsageError("--format %q: want auto, jsonl, nfdump, zeek or pcap", *format)
	}
	in := &traceInput{env: env, path: pos[0], format: *format, opt: replay.Options{MaxSNI: *maxSNI}, sslPath: *sslLog}
	for _, p := range strings.Split(*ports, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return command.UsageError("--port %q: want port numbers 1-65535, comma-separated", *ports)
		}
		in.opt.Ports = append(in.opt.Ports, uint16(n))
	}
	limits := synth.Limits{
		MaxSNI: *maxSNI, CacheMax: *cacheMax, TargetsMax: *targetsMax, MaxSpan: *maxSpan,
		RDNSRate: *rdnsRate, RDNSConcurrency: *rdnsConc, RDNSTimeout: *rdnsTimeout, RDNSMax: *rdnsMax,
	}
	if err := command.OptionError(limits.Validate(), replaySynthFlags); err != nil {
		return err
	}
	if !*rdns {
		for _, f := range []string{"resolver", "rdns-rate", "rdns-concurrency", "rdns-timeout", "rdns-cache", "rdns-cache-max-age", "rdns-max"} {
			if set[f] {
				return command.UsageError("--%s goes with --rdns", f)
			}
		}
	}
	if *rdns && pos[0] == "-" {
		return command.UsageError("--rdns reads the trace twice (a first pass looks up each distinct server address before synthesis), so it needs a TRACE file, not stdin")
	}

	cfg := synth.Config{
		Source:        pos[0],
		Compare:       *compare,
		Reorder:       *reorder,
		CacheLifetime: *lifetime,
		CacheMax:      *cacheMax,
		TargetsMax:    *targetsMax,
		MaxSpan:       *maxSpan,
	}
	if *reorder == 0 {
		cfg.Reorder = -1
	}
	have := map[string]bool{synth.MethodSNI: true, synth.MethodMap: *mapFile != "", synth.MethodRDNS: *rdns || g != nil}
	for _, m := range strings.Split(*naming, ",") {
		m = strings.TrimSpace(m)
		if _, ok := have[m]; !ok {
			return command.UsageError("--name %q: want sni, map and rdns in the order to try them", *naming)
		}
		if slices.Contains(cfg.Naming, m) {
			return command.UsageError("--name %q lists %s twice", *naming, m)
		}
		if !have[m] {
			if !set["name"] {
				continue // the default order names what is configured
			}
			flagFor := map[string]string{synth.MethodMap: "--map FILE", synth.MethodRDNS: "--rdns (or --generate)"}[m]
			return command.UsageError("--name lists %s, which needs %s", m, flagFor)
		}
		cfg.Naming = append(cfg.Naming, m)
	}
	// What flags configure must be used; the generator's own PTR records
	// may be left out.
	for m, on := range map[string]bool{synth.MethodMap: *mapFile != "", synth.MethodRDNS: *rdns} {
		if on && !slices.Contains(cfg.Naming, m) {
			return command.UsageError("--name %q leaves out %s, which other flags configure", *naming, m)
		}
	}
	if *mapFile != "" {
		f, err := os.Open(*mapFile)
		if err != nil {
			return err
		}
		m, err := synth.ParseMap(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--map %s: %w", *mapFile, err)
		}
		cfg.Map = m
	}

	sum := replaySynthSummary{}
	if *rdns {
		st, over, err := replaySynthRDNS(ctx, env, in, &cfg, synthRDNSFlags{
			resolver: *resolver, rate: *rdnsRate, concurrency: *rdnsConc, timeout: *rdnsTimeout,
			cache: *rdnsCache, maxAge: *rdnsMaxAge, max: *rdnsMax,
		})
		if err != nil {
			return err
		}
		sum.RDNS, sum.RDNSOverMax = &st, over
	}

	var (
		r        replay.Reader
		s        *synth.Synth
		setExtra func(func() string)
	)
	if g != nil {
		// The generator's PTR records answer reverse DNS, and its dead
		// hosts are dead whatever its flows look like.
		cfg.RDNS, cfg.Dead = g, g
		o := g.Options()
		cfg.Source = fmt.Sprintf("generator seed=%d flows=%d duration=%v clients=%d start=%s no-sni=%v dead-answered=%v",
			o.Seed, o.Flows, o.Duration, o.Clients, o.Start.Format(time.RFC3339), o.NoSNI, !o.DeadUnanswered)
		in.format = ""
		gp := &genProgress{r: g, w: env.Stderr, total: o.Flows, start: time.Now(), last: time.Now()}
		r, setExtra = gp, func(f func() string) { gp.extra = f }
	} else {
		prog := &traceProgress{ctx: ctx, w: env.Stderr, start: time.Now(), last: time.Now(), label: "replay synth"}
		var closeIn func()
		if r, closeIn, err = in.open(prog); err != nil {
			return err
		}
		defer closeIn()
		switch in.format {
		case replay.FormatZeek, replay.FormatPCAP:
			cfg.Counts = synth.CountsBothWays
		}
		cfg.Source = fmt.Sprintf("%s (%s)", pos[0], in.format)
		prog.stats = r.Stats
		setExtra = func(f func() string) { prog.extra = f }
	}
	if s, err = synth.New(cfg); err != nil {
		return err
	}
	setExtra(func() string {
		flows, named := s.Progress()
		if flows == 0 {
			return ""
		}
		return fmt.Sprintf(", %.1f%% named", 100*float64(named)/float64(flows))
	})

	// The schedule is written beside --out and renamed over it when
	// complete: a schedule without its summary is no schedule, so an
	// interrupted or failed run leaves none (and any earlier one intact).
	dst := env.Stdout
	var tmp *os.File
	if *out != "" {
		if tmp, err = os.CreateTemp(filepath.Dir(*out), filepath.Base(*out)+".*.tmp"); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer func() {
			if tmp != nil {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		dst = tmp
	}
	res, err := s.Run(ctx, r, dst)
	if err == nil && tmp != nil {
		if err = tmp.Close(); err == nil {
			if err = os.Rename(tmp.Name(), *out); err == nil {
				tmp = nil
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted after %d flows: no schedule written", res.Flows)
		}
		if errors.Is(err, synth.ErrTooManyTargets) {
			return fmt.Errorf("%w (raise --targets-max)", err)
		}
		if errors.Is(err, synth.ErrSpan) {
			return fmt.Errorf("%w (raise --max-span)", err)
		}
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	sum.Source, sum.Format, sum.Naming = cfg.Source, in.format, cfg.Naming
	sum.Result = res
	sum.Seconds = len(res.Seconds)
	if *asJSON {
		// A schedule on stdout keeps stdout to itself.
		rep := env.Stdout
		if *out == "" {
			rep = env.Stderr
		}
		return command.WriteJSON(rep, sum)
	}
	printSynthSummary(env.Stderr, &sum)
	return nil
}

// newSynthGenerator makes the generator --generate reads, its options as
// pkie replay gen computes them from the same flags.
func newSynthGenerator(def gen.Options, set map[string]bool, flows int64, duration time.Duration, seed uint64, scale float64, clients int, start string, noSNI, deadAnswered bool) (*gen.Generator, error) {
	switch {
	case scale <= 0 || scale > 100:
		return nil, command.UsageError("--scale %v: want a factor above 0, at most 100", scale)
	case duration <= 0:
		return nil, command.UsageError("--duration must be positive")
	case set["flows"] && flows < 0:
		return nil, command.UsageError("--flows must not be negative")
	case set["clients"] && clients < 1:
		return nil, command.UsageError("--clients must be at least 1")
	}
	o := def.Scaled(scale)
	if !set["flows"] {
		// The paper's rate over the chosen duration.
		flows = int64(float64(o.Flows) * float64(duration) / float64(def.Duration))
	}
	o.Flows, o.Duration, o.Seed = flows, duration, seed
	if set["clients"] {
		o.Clients = clients
	}
	var err error
	if o.Start, err = time.Parse(time.RFC3339Nano, start); err != nil {
		return nil, command.UsageError("--start %q: want RFC 3339", start)
	}
	o.NoSNI, o.DeadUnanswered = noSNI, !deadAnswered
	g, err := gen.New(o)
	if err != nil {
		return nil, command.UsageError("%v", err)
	}
	return g, nil
}

// genProgress sits between the generator and synthesis and, at most once a
// second and only after the first, prints how far it has got.
type genProgress struct {
	r           replay.Reader
	w           io.Writer
	total, n    int64
	start, last time.Time
	extra       func() string
}

func (p *genProgress) Next() (replay.Flow, error) {
	f, err := p.r.Next()
	if p.n++; p.n%4096 == 0 {
		if now := time.Now(); now.Sub(p.last) >= time.Second {
			p.last = now
			more := ""
			if p.extra != nil {
				more = p.extra()
			}
			fmt.Fprintf(p.w, "pkie replay synth: %d of %d flows made (%.0f%%, %.0f/s)%s\n",
				p.n, p.total, 100*float64(p.n)/float64(max(p.total, 1)), float64(p.n)/now.Sub(p.start).Seconds(), more)
		}
	}
	return f, err
}

func (p *genProgress) Stats() replay.Stats { return p.r.Stats() }

type synthRDNSFlags struct {
	resolver    string
	rate        float64
	concurrency int
	timeout     time.Duration
	cache       string
	maxAge      time.Duration
	max         int
}

// replaySynthRDNS is the first pass: it reads the trace for the distinct
// server addresses whose flows reverse DNS would name, looks them up
// (answering from and adding to the cache file), and sets cfg.RDNS.
func replaySynthRDNS(ctx context.Context, env *command.Env, in *traceInput, cfg *synth.Config, fl synthRDNSFlags) (synth.RDNSStats, int64, error) {
	cache := synth.NewRDNSCache()
	if fl.cache != "" {
		f, err := os.Open(fl.cache)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return synth.RDNSStats{}, 0, err
		default:
			cache, err = synth.ParseRDNSCache(f)
			f.Close()
			if err != nil {
				return synth.RDNSStats{}, 0, fmt.Errorf("--rdns-cache %s: %w (remove it to start afresh)", fl.cache, err)
			}
		}
	}
	cfg.RDNS = cache

	prog := &traceProgress{ctx: ctx, w: env.Stderr, start: time.Now(), last: time.Now(), label: "replay synth (reverse DNS pass)"}
	r, closeIn, err := in.open(prog)
	if err != nil {
		return synth.RDNSStats{}, 0, err
	}
	prog.stats = r.Stats
	set := synth.NewAddrSet(fl.max)
	err = synth.CollectRDNS(ctx, r, cfg, set)
	closeIn()
	if err != nil {
		if ctx.Err() != nil {
			return synth.RDNSStats{}, 0, errors.New("interrupted while reading the trace for reverse DNS: no schedule written")
		}
		return synth.RDNSStats{}, 0, fmt.Errorf("%s: %w", in.path, err)
	}
	if set.Over > 0 {
		fmt.Fprintf(env.Stderr, "pkie replay synth: %d flows' addresses were past --rdns-max %d and are not looked up\n", set.Over, fl.max)
	}
	fmt.Fprintf(env.Stderr, "pkie replay synth: reverse DNS of %d distinct addresses (%d cached) at most %g a second\n",
		set.Len(), countCached(cache, set), fl.rate)
	rd := &synth.ReverseDNS{
		Resolver: synth.Resolver(fl.resolver), Rate: fl.rate, Concurrency: fl.concurrency,
		Timeout: fl.timeout, Cache: cache, MaxAge: fl.maxAge,
	}
	started, last := time.Now(), time.Now()
	rd.Progress = func(st synth.RDNSStats) {
		if now := time.Now(); now.Sub(last) >= time.Second {
			last = now
			fmt.Fprintf(env.Stderr, "pkie replay synth: reverse DNS: %d of %d asked (%.0f/s): %d named, %d no name, %d failed\n",
				st.Queries, st.Addresses-st.Cached, float64(st.Queries)/now.Sub(started).Seconds(), st.Named, st.NoName+st.Invalid, st.Errors)
		}
	}
	st, rerr := rd.Resolve(ctx, set.Addrs())
	if fl.cache != "" {
		// Keep what was answered, even when interrupted.
		err := atomicfile.Write(fl.cache, 0o600, func(w io.Writer) error {
			_, err := cache.WriteTo(w)
			return err
		})
		if err != nil {
			return st, set.Over, fmt.Errorf("--rdns-cache %s: %w", fl.cache, err)
		}
	}
	if rerr != nil {
		return st, set.Over, fmt.Errorf("interrupted during reverse DNS (%d of %d addresses asked): no schedule written", st.Queries, st.Addresses-st.Cached)
	}
	if st.Errors > 0 {
		fmt.Fprintf(env.Stderr, "pkie replay synth: %d reverse-DNS lookups failed and are not cached; first: %s\n", st.Errors, st.FirstError)
	}
	return st, set.Over, nil
}

func countCached(c *synth.RDNSCache, set *synth.AddrSet) int {
	n := 0
	for _, a := range set.Addrs() {
		if c.Looked(a) {
			n++
		}
	}
	return n
}

func sharePct(n, of int64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

func printSynthSummary(w io.Writer, s *replaySynthSummary) {
	from := s.Format
	if from == "" {
		from = "generator"
	}
	fmt.Fprintf(w, "pkie replay synth: %s: %d flows (%d read, %d malformed), naming %s\n",
		from, s.Flows, s.Trace.Read, s.Trace.Malformed, strings.Join(s.Naming, ","))
	fmt.Fprintf(w, "  named by SNI / map / reverse DNS / lost: %d / %d / %d / %d (lost %s)\n",
		s.NamedSNI, s.NamedMap, s.NamedRDNS, s.Unnamed, sharePct(s.Unnamed, s.Flows))
	if s.SNIRecovered >= 0 {
		fmt.Fprintf(w, "  SNI recovered: %d flows (%s of flows) named by SNI whose address had no name", s.SNIRecovered, sharePct(s.SNIRecovered, s.Flows))
		if s.CompareUnmeasured > 0 {
			fmt.Fprintf(w, "; %d more whose address was not looked up", s.CompareUnmeasured)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "  SNI recovered: not measured (needs sni with map or rdns naming, and --compare)")
	}
	if s.RDNS != nil {
		fmt.Fprintf(w, "  reverse DNS: %d addresses, %d cached, %d queries: %d named, %d no name, %d invalid, %d failed",
			s.RDNS.Addresses, s.RDNS.Cached, s.RDNS.Queries, s.RDNS.Named, s.RDNS.NoName, s.RDNS.Invalid, s.RDNS.Errors)
		if s.RDNSOverMax > 0 {
			fmt.Fprintf(w, "; %d flows past --rdns-max", s.RDNSOverMax)
		}
		fmt.Fprintln(w)
	}
	named := s.NamedSNI + s.NamedMap + s.NamedRDNS
	fmt.Fprintf(w, "  client cache hits: %d (%s of named flows)", s.ClientCacheHits, sharePct(s.ClientCacheHits, named))
	if s.CacheEvicted > 0 {
		fmt.Fprintf(w, ", %d entries evicted past --cache-max", s.CacheEvicted)
	}
	fmt.Fprintf(w, "\n  requests: %d (%s of named flows)\n", s.Requests, sharePct(s.Requests, named))
	fmt.Fprintf(w, "  targets (dead): %d (%d)\n", s.Targets, s.DeadTargets)
	if s.Late > 0 {
		fmt.Fprintf(w, "  late: %d flows later than --reorder allowed, requested at the window's edge\n", s.Late)
	}
	fmt.Fprintf(w, "  %d seconds, %s of HTTPS\n", s.Seconds, decimalBytes(s.HTTPSBytes))
}

// decimalBytes writes a byte count in decimal units, as the paper's 2.77 TB.
func decimalBytes(b float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB"}
	i := 0
	for b >= 1000 && i < len(units)-1 {
		b /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.2f %s", b, units[i])
}
