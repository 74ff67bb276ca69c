package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/roots"
	"github.com/pkie/pkie/internal/scan/scanbench"
	"github.com/pkie/pkie/internal/testbed"
)

func runBenchScan(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench scan", "[--sites N] [--concurrency C] [--rounds R] [--json]")
	sites := fs.Int("sites", 2000, "synthetic sites, each scanned once per round")
	conc := fs.Int("concurrency", 50, "workers for the scanner and the raw-handshake ceiling")
	listeners := fs.Int("listeners", 4, "TLS listeners the sites share")
	rounds := fs.Int("rounds", 3, "alternating ceiling and scan rounds")
	serve := fs.String("serve", "", "instead of measuring, serve the synthetic web until interrupted, writing DIR/sites.csv, DIR/resolve.txt and DIR/roots.pem for pkie scan and pkie roots")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	if *sites < 100 || *conc < 1 || *listeners < 1 || *rounds < 1 {
		return command.UsageError("--sites must be at least 100; --concurrency, --listeners and --rounds at least 1")
	}
	if *serve != "" {
		return serveSynthWeb(ctx, env, *serve, *sites, *listeners)
	}
	r, err := scanbench.Throughput(ctx, scanbench.ThroughputConfig{
		Sites: *sites, Concurrency: *conc, Listeners: *listeners, Rounds: *rounds, Log: command.PrefixWriter{Env: env, Prefix: "bench scan: "},
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, r)
	}
	fmt.Fprintf(env.Stdout, "scan of %d synthetic sites on %d listeners, %d workers, %d CPUs\n", r.Sites, r.Listeners, r.Concurrency, r.CPUs)
	fmt.Fprintf(env.Stdout, "  raw Go TLS handshakes (ceiling)  %8.0f /s  rounds %v\n", r.CeilingMean, rounded(r.Ceiling))
	fmt.Fprintf(env.Stdout, "  pkie scan                        %8.0f /s  rounds %v\n", r.ScanMean, rounded(r.Scan))
	fmt.Fprintf(env.Stdout, "  ratio %.2f (target >= 0.70)\n", r.Ratio)
	return nil
}

func rounded(x []float64) []int {
	out := make([]int, len(x))
	for i, v := range x {
		out[i] = int(v + 0.5)
	}
	return out
}

// benchRootsResult is pkie bench roots's report.
type benchRootsResult struct {
	File           string `json:"file"`
	Generated      bool   `json:"generated"`
	Records        int    `json:"records"`
	Bytes          int64  `json:"bytes"`
	DistinctChains int    `json:"distinct_chains"`
	Verifications  int64  `json:"verifications"`
	LeafChecks     int64  `json:"leaf_checks"`
	// LeavesByIssuerAlg is known when this run generated the file.
	LeavesByIssuerAlg map[testbed.KeyAlg]int `json:"leaves_by_issuer_alg,omitempty"`
	ReadSeconds       float64                `json:"read_seconds"` // the ceiling: reading lines, nothing else
	LoadSeconds       float64                `json:"load_seconds"` // parse + verify
	AnalyzeSeconds    float64                `json:"analyze_seconds"`
	TotalSeconds      float64                `json:"total_seconds"`
	RecordsPerSec     float64                `json:"records_per_second"`
	PeakRSSBytes      int64                  `json:"peak_rss_bytes"`
	SitesValid        int                    `json:"sites_valid"`
	MinimalRoots      int                    `json:"minimal_roots"`
	TargetSeconds     float64                `json:"target_seconds"`
	TargetRSSBytes    int64                  `json:"target_rss_bytes"`
	ReadMBPerSecond   float64                `json:"read_mb_per_second"`
}

func runBenchRoots(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench roots", "[--records N] [--chains C | --distinct] [--ca-alg LIST] [--dir DIR] [--json]")
	records := fs.Int("records", 1_000_000, "scan records to analyse")
	chains := fs.Int("chains", 10_000, "distinct chains the records share")
	distinct := fs.Bool("distinct", false, "give every answered record a leaf of its own, as on the real web (issuing them takes minutes; --dir keeps the file)")
	caAlg := fs.String("ca-alg", string(testbed.RSA2048), "comma-separated CA key types, taken by the roots in turn: rsa-2048, ecdsa-p256, ecdsa-p384")
	dir := fs.String("dir", "", "where the generated scan file and roots live (reused if present; default: a temp dir, removed)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	if *records < 1 || *chains < 1 {
		return command.UsageError("--records and --chains must be positive")
	}
	var algs []testbed.KeyAlg
	for _, a := range strings.Split(*caAlg, ",") {
		switch alg := testbed.KeyAlg(strings.TrimSpace(a)); alg {
		case testbed.RSA2048, testbed.ECDSAP256, testbed.ECDSAP384:
			algs = append(algs, alg)
		default:
			return command.UsageError("--ca-alg: unknown key type %q (want rsa-2048, ecdsa-p256 or ecdsa-p384)", a)
		}
	}
	logw := command.PrefixWriter{Env: env, Prefix: "bench roots: "}
	if *dir == "" {
		d, err := os.MkdirTemp("", "pkie-bench-roots-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	shape := fmt.Sprintf("%d", *chains)
	if *distinct {
		shape = "distinct"
	}
	name := fmt.Sprintf("scan-%d-%s-%s.jsonl", *records, shape, strings.ReplaceAll(*caAlg, ",", "+"))
	res := benchRootsResult{File: filepath.Join(*dir, name), TargetSeconds: 30, TargetRSSBytes: 2 << 30}
	rootsPath := res.File + ".roots.pem"
	if _, err := os.Stat(res.File); err != nil {
		res.Generated = true
		f, err := os.Create(res.File)
		if err != nil {
			return err
		}
		rf, err := os.Create(rootsPath)
		if err != nil {
			f.Close()
			return err
		}
		var g *scanbench.GenResult
		g, err = scanbench.Generate(f, rf, scanbench.GenConfig{Records: *records, Chains: *chains, Distinct: *distinct, CAAlgs: algs, Log: logw})
		if g != nil {
			res.LeavesByIssuerAlg = g.LeavesByIssuerAlg
		}
		f.Close()
		rf.Close()
		if err != nil {
			os.Remove(res.File)
			return err
		}
	}
	if st, err := os.Stat(res.File); err == nil {
		res.Bytes = st.Size()
	}
	start := time.Now()
	if _, _, err := scanbench.ReadCeiling(res.File); err != nil {
		return err
	}
	res.ReadSeconds = time.Since(start).Seconds()
	res.ReadMBPerSecond = float64(res.Bytes) / 1e6 / res.ReadSeconds

	store, err := roots.LoadPEM(rootsPath)
	if err != nil {
		return err
	}
	f, err := os.Open(res.File)
	if err != nil {
		return err
	}
	defer f.Close()
	start = time.Now()
	d, err := roots.Load(ctx, []roots.Input{{Name: res.File, R: f}}, roots.LoadOptions{Store: store, Progress: logw})
	if err != nil {
		return err
	}
	res.LoadSeconds = time.Since(start).Seconds()
	t := time.Now()
	rep := d.Analyze(0.8)
	res.AnalyzeSeconds = time.Since(t).Seconds()
	res.TotalSeconds = time.Since(start).Seconds()
	res.Records = rep.Load.Records
	res.DistinctChains = rep.Load.DistinctChain
	res.Verifications = rep.Load.Verifications
	res.LeafChecks = rep.Load.LeafChecks
	res.RecordsPerSec = float64(res.Records) / res.TotalSeconds
	res.SitesValid = rep.SitesValid
	if rep.Minimal != nil {
		res.MinimalRoots = len(rep.Minimal.Roots)
	}
	res.PeakRSSBytes = scanbench.PeakRSS()
	if *asJSON {
		return command.WriteJSON(env.Stdout, res)
	}
	w := env.Stdout
	fmt.Fprintf(w, "roots over %d records (%.2f GB, %d distinct chains: %d verified in full, %d by leaf)\n", res.Records, float64(res.Bytes)/1e9, res.DistinctChains, res.Verifications, res.LeafChecks)
	if len(res.LeavesByIssuerAlg) > 0 {
		fmt.Fprintf(w, "  leaves by issuer key type: %v\n", res.LeavesByIssuerAlg)
	}
	fmt.Fprintf(w, "  read lines only (ceiling)  %6.2f s  (%.0f MB/s)\n", res.ReadSeconds, res.ReadMBPerSecond)
	fmt.Fprintf(w, "  load: parse + verify       %6.2f s\n", res.LoadSeconds)
	fmt.Fprintf(w, "  analyze                    %6.2f s\n", res.AnalyzeSeconds)
	fmt.Fprintf(w, "  total                      %6.2f s  (%.0f records/s; target <= %.0f s)\n", res.TotalSeconds, res.RecordsPerSec, res.TargetSeconds)
	fmt.Fprintf(w, "  peak RSS                   %6.0f MB (target <= %d MB)\n", float64(res.PeakRSSBytes)/1e6, res.TargetRSSBytes>>20)
	fmt.Fprintf(w, "  %d sites valid; minimal set for 80%%: %d roots\n", res.SitesValid, res.MinimalRoots)
	return nil
}

// serveSynthWeb runs a synthetic web for offline demonstrations of pkie scan
// and pkie roots, with its ground truth on stdout.
func serveSynthWeb(ctx context.Context, env *command.Env, dir string, sites, listeners int) error {
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: sites, Listeners: listeners, Seed: 1})
	if err != nil {
		return err
	}
	defer w.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"sites.csv": w.SiteList(), "resolve.txt": w.ResolveFile(), "roots.pem": w.RootsPEM()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(env.Stdout, "serving %d synthetic sites on %v; interrupt to stop\n", len(w.Sites), w.Listeners)
	fmt.Fprintf(env.Stdout, "  pkie scan %s --resolve-file %s --allow-private --out scan.jsonl\n",
		filepath.Join(dir, "sites.csv"), filepath.Join(dir, "resolve.txt"))
	fmt.Fprintf(env.Stdout, "  pkie roots scan.jsonl --roots %s\n", filepath.Join(dir, "roots.pem"))
	fmt.Fprintf(env.Stdout, "truth: %d sites validate; sites per root:\n", w.ValidSites())
	for i, n := range w.RootSiteCounts() {
		fmt.Fprintf(env.Stdout, "  %-40s %d\n", w.Roots[i].Cert.Subject.CommonName, n)
	}
	<-ctx.Done()
	return nil
}
