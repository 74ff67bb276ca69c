package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/chart"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/roots"
	"github.com/pkie/pkie/internal/termtext"
	"github.com/pkie/pkie/internal/verify"
	"github.com/pkie/pkie/internal/verify/corpus"
)

const verifyCorpusUsage = `--corpus SPEC[,SPEC...] [flags]

Runs every back end over a corpus of chains and reports how often each gives
the expected verdict, how often each pair of back ends agrees, and every case
where they disagree, each with the libraries' reasons and, where a documented
difference between the libraries explains it, that difference; the rest are
listed as unexplained (docs/measurement/verification.md, "Differential testing").

Corpora (SPEC):
  known              the testbed's known valid and invalid chains
  bettertls          Netflix BetterTLS (path building, name constraints),
                     generated in process from the Go module pkie is built with
  bettertls:FILE     a "bettertls export-tests" JSON file
  limbo:FILE         an x509-limbo test suite (limbo.json)
  scan:FILE          a pkie scan file: real sites' chains, no expectation,
                     against --roots

Exit status: 0 the corpus ran (disagreements are findings, not failures);
1 with --strict, a disagreement no known difference explains, or a back end
that gave no verdict; 2 bad usage or an operational error.`

// hasArg reports whether args holds flag name (as --name, -name, or either
// with =value).
func hasArg(args []string, name string) bool {
	name = strings.TrimLeft(name, "-")
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// corpusReport is what --json prints.
type corpusReport struct {
	Corpora []string         `json:"corpora"`
	Time    time.Time        `json:"time"`
	Missing []verify.Missing `json:"missing"`
	Workers int              `json:"workers"`
	Elapsed time.Duration    `json:"elapsed_ns"`
	*corpus.Report
}

func runVerifyCorpus(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "verify", verifyCorpusUsage)
	specs := fs.String("corpus", "", "comma-separated corpora: known, bettertls, bettertls:`FILE`, limbo:FILE, scan:FILE")
	rootsFlag := fs.String("roots", "mozilla", "trust anchors for scan:FILE: mozilla, system, or a PEM `FILE`")
	backendsFlag := fs.String("backends", strings.Join(verify.Names, ","), "comma-separated back ends to run")
	verifierDir := fs.String("verifier-dir", "", "look for the helper programs here first (a list separated by "+string(filepath.ListSeparator)+"), then in $PKIE_VERIFIER_DIR, pkie's directory and $PATH")
	helperTimeout := fs.Duration("helper-timeout", verify.DefaultHelperTimeout, "bound on one exchange with a helper; one that takes longer is killed")
	asJSON := fs.Bool("json", false, "print one JSON object")
	plot := fs.String("plot", "", "write a bar chart of agreement per back end and corpus to `FILE` (.svg, .png or .pdf)")
	limit := fs.Int("limit", 0, "run at most `N` cases of each corpus (0: all)")
	every := fs.Int("every", 1, "run every `N`th case of each corpus (a deterministic sample)")
	show := fs.Int("show", 20, "print at most `N` disagreements in full (-1: all); --json holds all")
	workers := fs.Int("workers", 2, "run `N` sets of back ends side by side, each its own helper processes (2 is faster than 1 even on two busy cores: docs/measurement/verification.md)")
	strict := fs.Bool("strict", false, "exit 1 on any unexplained disagreement or back-end error")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("pkie verify --corpus takes no arguments, got %q", pos)
	}
	if *specs == "" {
		return command.UsageError("--corpus needs at least one corpus (run \"pkie verify --corpus known -h\")")
	}
	if *limit < 0 || *every < 1 || *workers < 1 || *workers > 16 || *show < -1 {
		return command.UsageError("--limit must be at least 0, --every at least 1, --workers 1 to 16, --show at least -1")
	}
	if *helperTimeout <= 0 {
		return command.UsageError("--helper-timeout must be positive")
	}
	if *plot != "" {
		switch strings.ToLower(filepath.Ext(*plot)) {
		case ".svg", ".png", ".pdf":
		default:
			return command.UsageError("--plot %q: want a .svg, .png or .pdf file", *plot)
		}
	}
	var names []string
	for _, n := range strings.Split(*backendsFlag, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return command.UsageError("--backends names no back end")
	}

	now := time.Now()
	all := &corpus.Corpus{}
	var list []string
	for _, spec := range strings.Split(*specs, ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		c, err := loadCorpus(env, spec, *rootsFlag, now)
		if err != nil {
			return err
		}
		c.Sample(*every)
		if *limit > 0 && len(c.Cases) > *limit {
			c.Cases = c.Cases[:*limit]
		}
		fmt.Fprintf(env.Stderr, "corpus %s: %d cases, %d skipped\n", spec, len(c.Cases), len(c.Skipped))
		all.Add(c)
		list = append(list, spec)
	}
	if len(all.Cases) == 0 {
		return command.UsageError("the corpora hold no case to run")
	}

	dirs := verify.DefaultDirs(env.Getenv)
	if *verifierDir != "" {
		dirs = append(filepath.SplitList(*verifierDir), dirs...)
	}
	var sets [][]verify.Backend
	var missing []verify.Missing
	defer func() {
		for _, s := range sets {
			verify.CloseAll(s)
		}
	}()
	for w := 0; w < *workers; w++ {
		bs, miss, err := verify.Open(ctx, verify.Options{Names: names, Dirs: dirs, Timeout: *helperTimeout})
		if err != nil {
			return command.UsageError("--backends: %v", err)
		}
		if w == 0 {
			missing = miss
			for _, m := range miss {
				fmt.Fprintf(env.Stderr, "back end %s: %s\n", m.Name, termtext.Escape(m.Why))
			}
		} else if len(bs) != len(sets[0]) {
			verify.CloseAll(bs)
			return fmt.Errorf("back-end set %d opened %d back ends, the first %d", w+1, len(bs), len(sets[0]))
		}
		sets = append(sets, bs)
	}
	if len(sets[0]) == 0 {
		return command.UsageError("no back end could be opened")
	}

	start := time.Now()
	last := start
	rep := corpus.RunSets(ctx, sets, all.Cases, func(done, total int) {
		// At most a line a second, and the last.
		if time.Since(last) >= time.Second || done == total {
			last = time.Now()
			fmt.Fprintf(env.Stderr, "verify --corpus: %d/%d cases (%.0f%%), %s\n", done, total, 100*float64(done)/float64(total), time.Since(start).Round(time.Second))
		}
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return err
	}
	rep.AddSkipped(all.Skipped)
	if missing == nil {
		missing = []verify.Missing{}
	}

	if *asJSON {
		if err := command.WriteJSON(env.Stdout, corpusReport{Corpora: list, Time: now.UTC(), Missing: missing,
			Workers: *workers, Elapsed: elapsed, Report: rep}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Stdout, "pkie verify --corpus %s: %d back ends, %s\n", strings.Join(list, ","), len(sets[0]), elapsed.Round(time.Millisecond))
		for _, b := range rep.Backends {
			fmt.Fprintf(env.Stdout, "  %-12s %s\n", b.Name, b.Library)
		}
		for _, m := range missing {
			fmt.Fprintf(env.Stdout, "  %-12s not run: %s\n", m.Name, termtext.Escape(m.Why))
		}
		fmt.Fprintln(env.Stdout)
		if err := rep.WriteText(env.Stdout, *show); err != nil {
			return err
		}
	}
	// Results first: a plot that cannot be written must not lose the run.
	if *plot != "" {
		if err := plotCorpus(rep, *plot); err != nil {
			return fmt.Errorf("--plot: %w (the results above are complete)", err)
		}
		fmt.Fprintf(env.Stderr, "wrote %s\n", *plot)
	}
	if *strict {
		broken := 0
		for _, m := range missing {
			if m.Found {
				broken++ // built but would not start: a failure, not an absence
			}
		}
		if broken > 0 {
			fmt.Fprintf(env.Stderr, "--strict: %d back ends built but not started\n", broken)
			return command.Negative()
		}
		errs := 0
		for _, b := range rep.Backends {
			errs += b.Total.Errors
		}
		if rep.Unexplained > 0 || errs > 0 {
			fmt.Fprintf(env.Stderr, "--strict: %d unexplained disagreements, %d back-end errors\n", rep.Unexplained, errs)
			return command.Negative()
		}
	}
	return nil
}

// loadCorpus reads one SPEC.
func loadCorpus(env *command.Env, spec, rootsFlag string, now time.Time) (*corpus.Corpus, error) {
	kind, file, hasFile := strings.Cut(spec, ":")
	if hasFile && file == "" {
		return nil, command.UsageError("--corpus %s: no file after the colon", spec)
	}
	open := func() (*os.File, error) {
		f, err := os.Open(file)
		if err != nil {
			return nil, command.UsageError("--corpus %s: %v", spec, err)
		}
		return f, nil
	}
	switch {
	case kind == "known" && !hasFile:
		return corpus.Known(now)
	case kind == "bettertls" && !hasFile:
		return corpus.BetterTLS(now, corpus.BetterTLSOptions{})
	case kind == "bettertls":
		f, err := open()
		if err != nil {
			return nil, err
		}
		defer f.Close()
		c, err := corpus.ReadBetterTLS(f, now, corpus.BetterTLSOptions{})
		if err != nil {
			return nil, command.UsageError("--corpus %s: %v", spec, err)
		}
		return c, nil
	case kind == "limbo" && hasFile:
		f, err := open()
		if err != nil {
			return nil, err
		}
		defer f.Close()
		c, err := corpus.ReadLimbo(f, now)
		if err != nil {
			return nil, command.UsageError("--corpus %s: %v", spec, err)
		}
		return c, nil
	case kind == "scan" && hasFile:
		anchors, err := corpusRoots(env, rootsFlag)
		if err != nil {
			return nil, err
		}
		f, err := open()
		if err != nil {
			return nil, err
		}
		defer f.Close()
		c, err := corpus.Scan(f, anchors, now)
		if err != nil {
			return nil, command.UsageError("--corpus %s: %v", spec, err)
		}
		return c, nil
	}
	return nil, command.UsageError("--corpus %q: want known, bettertls, bettertls:FILE, limbo:FILE or scan:FILE", spec)
}

// corpusRoots loads the trust anchors a scan corpus is verified against.
func corpusRoots(env *command.Env, which string) ([][]byte, error) {
	var st *roots.Store
	var err error
	switch which {
	case "mozilla":
		st, err = roots.Mozilla()
	case "system":
		st, err = roots.System(env.Getenv)
	default:
		st, err = roots.LoadPEM(which)
	}
	if err != nil {
		return nil, command.UsageError("--roots: %v", err)
	}
	der := make([][]byte, len(st.Certs))
	for i, c := range st.Certs {
		der[i] = c.Raw
	}
	return der, nil
}

// plotCorpus draws, per corpus, each back end's agreement: with the
// expected verdict where the corpus states one (soft cases counted as
// agreeing), with the majority of the back ends where it does not.
func plotCorpus(rep *corpus.Report, path string) error {
	var srcs []string
	for s := range rep.Sources {
		srcs = append(srcs, s)
	}
	sort.Strings(srcs)
	b := chart.Bars{
		Title:  "Agreement per back end and corpus",
		YLabel: "% of cases (expected verdict; scan: majority verdict)",
		Labels: srcs,
	}
	for _, br := range rep.Backends {
		g := chart.BarGroup{Name: br.Name}
		for _, s := range srcs {
			t := br.BySource[s]
			v := 100 * t.Rate()
			if t.Unexpected == t.Cases {
				v = 100 * t.MajorityRate()
			}
			g.Values = append(g.Values, v)
		}
		b.Groups = append(b.Groups, g)
	}
	zero, hundred := 0.0, 112.0
	b.YMin, b.YMax = &zero, &hundred
	if err := b.Save(path); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}
