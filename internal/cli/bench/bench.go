package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/proofbench"
)

// benchmarks lists pkie bench's sub-benchmarks; add one line per benchmark.
var benchmarks = map[string]struct {
	summary string
	run     func(ctx context.Context, env *command.Env, args []string) error
}{
	"ct":     {"CT at the Web's scale: a mirror of a synthetic static-ct-api log beside the ceiling of fetching and hashing its tiles, proofs on its tree, add-chain of pkie's log beside TesseraCT (the PEC paper, Table 1)", runBenchCT},
	"obc":    {"origin-bound client certificates: key generation, first and return visits, a TLS terminator with client keys (Origin-Bound Certificates, USENIX Security 2012, §6)", runBenchOBC},
	"notary": {"notary throughput (cached, uncached) and client latency (Forced Perspectives, IMC 2014, Tables 1-4)", runBenchNotary},
	"pec":    {"the PEC cloud and client: throughput against an echo ceiling, verification cost, latency inflation, failover, loss, UDP blocked (the PEC paper, ASIA CCS 2018, §6)", runBenchPEC},
	"proofs": {"sorted-tree proofs: build, generate, verify, sizes (the PEC paper, ASIA CCS 2018, Tables 1-2)", runBenchProofs},
	"scan":   {"scan throughput against raw TLS handshakes on a synthetic web", runBenchScan},
	"roots":  {"pkie roots over a million generated scan records: time and peak RSS", runBenchRoots},
	"verify": {"certificate verification back ends (crypto/x509 serial and parallel, OpenSSL, webpki) timed per phase on sites shaped like the Servo certificate-verification experiment's and per chain shape", runBenchVerify},
	"soak":   {"the notary and the log under good traffic and every attack of docs/operations/security.md: success rate and p99", runBenchSoak},
}

func Bench(ctx context.Context, env *command.Env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		names := make([]string, 0, len(benchmarks))
		for name := range benchmarks {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintln(env.Stderr, "Usage: pkie bench <benchmark> [flags]\n\nBenchmarks:")
		for _, name := range names {
			fmt.Fprintf(env.Stderr, "  %-10s %s\n", name, benchmarks[name].summary)
		}
		if len(args) == 0 {
			return command.UsageError("name a benchmark: %s", strings.Join(names, ", "))
		}
		return nil
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		return command.UsageError("unknown benchmark %q; run \"pkie bench --help\" for the list", args[0])
	}
	return b.run(ctx, env, args[1:])
}

// benchProofsReport is the --json output: the CT-scale tree's figures at the
// top level and, with --revoked, the revocation-scale tree's under
// "revocation".
type benchProofsReport struct {
	*proofbench.Result
	Revocation *proofbench.Result `json:"revocation,omitempty"`
}

func runBenchProofs(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench proofs", "--leaves N [--revoked M] [--keys K] [--json]")
	leaves := fs.Uint64("leaves", 2129920, "keys in the tree (the PEC paper's CT log: 2,129,920)")
	revoked := fs.Uint64("revoked", 0, "also measure a tree of this many keys (the PEC paper's CRL: 53,164)")
	samples := fs.Int("keys", 1000, "random present and as many absent keys to prove (>= 1000)")
	dir := fs.String("dir", "", "directory for the temporary tree file (default: the system temp dir)")
	level := fs.Int("level", 0, "lowest interior level stored in the file (default: sortedtree.DefaultFileLevel)")
	seed := fs.Uint64("seed", 1, "seed for the random keys")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	if *leaves == 0 {
		return command.UsageError("--leaves must be at least 1")
	}
	if *samples < 1000 {
		return command.UsageError("--keys must be at least 1000 (got %d)", *samples)
	}
	if *level < 0 || *level > 32 {
		return command.UsageError("--level must be between 0 and 32")
	}
	cfg := proofbench.Config{Samples: *samples, Dir: *dir, Level: *level, Seed: *seed, Log: command.PrefixWriter{Env: env, Prefix: "bench proofs: "}}
	var rep benchProofsReport
	if *revoked > 0 {
		c := cfg
		c.Leaves = *revoked
		c.Origin = "pkie.example/revocation"
		c.Paper = proofbench.PaperRevocation()
		if rep.Revocation, err = proofbench.Run(ctx, c); err != nil {
			return err
		}
	}
	cfg.Leaves = *leaves
	cfg.Origin = "pkie.example/log"
	cfg.Paper = proofbench.PaperCT()
	if rep.Result, err = proofbench.Run(ctx, cfg); err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, rep)
	}
	printProofs(env, "sorted tree", rep.Result)
	if rep.Revocation != nil {
		printProofs(env, "revocation tree", rep.Revocation)
	}
	return nil
}

func printProofs(env *command.Env, name string, r *proofbench.Result) {
	w := env.Stdout
	fmt.Fprintf(w, "%s: %d leaves (depth %d), %d present + %d absent random keys\n", name, r.Leaves, r.Depth, r.Samples, r.Samples)
	fmt.Fprintf(w, "  build %.2f s, write %.2f s, open %.3f s (+%.2f s background fill); file %.1f MB; tree %.1f MB; peak RSS %.1f MB\n",
		r.BuildSeconds, r.WriteSeconds, r.OpenSeconds, r.WarmSeconds, float64(r.FileBytes)/1e6, float64(r.TreeBytes)/1e6, float64(r.PeakRSSBytes)/1e6)
	p := r.Paper
	if p != nil {
		fmt.Fprintf(w, "  paper: %s, %s leaves on an i7-4790: tree %.1f MB in memory, %.1f MB stored; averages (min-max) of 1,000 keys\n",
			p.Source, thousands(p.Leaves), p.TreeMemoryMB, p.StorageMB)
	}
	paper := func(f func(*proofbench.Paper) proofbench.PaperFigure) string {
		if p == nil {
			return ""
		}
		v := f(p)
		return fmt.Sprintf("%.0f (%.0f-%.0f)", v.Avg, v.Min, v.Max)
	}
	fmt.Fprintf(w, "  %-28s %10s %10s %10s  %s\n", "", "p50", "avg", "max", "paper avg (min-max)")
	row := func(label string, p50, avg, max float64, paperCell string) {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-28s %10.1f %10.1f %10.1f  %s", label, p50, avg, max, paperCell), " "))
	}
	row("generate presence (us)", r.GenPresenceUsP50, r.GenPresenceUsAvg, r.GenPresenceUsMax, paper(func(p *proofbench.Paper) proofbench.PaperFigure { return p.GenPresenceUs }))
	row("generate absence (us)", r.GenAbsenceUsP50, r.GenAbsenceUsAvg, r.GenAbsenceUsMax, paper(func(p *proofbench.Paper) proofbench.PaperFigure { return p.GenAbsenceUs }))
	row("verify presence (us)", r.VerifyPresenceUsP50, r.VerifyPresenceUsAvg, r.VerifyPresenceUsMax, "")
	row("verify absence (us)", r.VerifyAbsenceUsP50, r.VerifyAbsenceUsAvg, r.VerifyAbsenceUsMax, "")
	row("verify presence + sig (us)", r.VerifyPresenceSigUsP50, r.VerifyPresenceSigUsAvg, r.VerifyPresenceSigUsMax, paper(func(p *proofbench.Paper) proofbench.PaperFigure { return p.VerifyPresenceUs }))
	row("verify absence + sig (us)", r.VerifyAbsenceSigUsP50, r.VerifyAbsenceSigUsAvg, r.VerifyAbsenceSigUsMax, paper(func(p *proofbench.Paper) proofbench.PaperFigure { return p.VerifyAbsenceUs }))
	row("verify presence + head (us)", r.VerifyPresenceHeadUsP50, r.VerifyPresenceHeadUsAvg, r.VerifyPresenceHeadUsMax, "")
	row("verify absence + head (us)", r.VerifyAbsenceHeadUsP50, r.VerifyAbsenceHeadUsAvg, r.VerifyAbsenceHeadUsMax, "")
	row("verify presence + det. (us)", r.VerifyPresenceDetachedUsP50, r.VerifyPresenceDetachedUsAvg, r.VerifyPresenceDetachedUsMax, "")
	row("verify absence + det. (us)", r.VerifyAbsenceDetachedUsP50, r.VerifyAbsenceDetachedUsAvg, r.VerifyAbsenceDetachedUsMax, "")
	fmt.Fprintf(w, "  %-28s %10s %10s %10s  %s\n", "", "min", "avg", "max", "paper avg (min-max)")
	fmt.Fprintf(w, "  %-28s %10d %10.1f %10d\n", "presence proof (bytes)", r.PresenceBytesMin, r.PresenceBytesAvg, r.PresenceBytesMax)
	fmt.Fprintf(w, "  %-28s %10d %10.1f %10d\n", "absence proof (bytes)", r.AbsenceBytesMin, r.AbsenceBytesAvg, r.AbsenceBytesMax)
	fmt.Fprintf(w, "  %-28s %10s %10.1f %10d  %s\n", "presence + det. sig (bytes)", "", r.PresenceSignedBytesAvg, r.PresenceSignedBytesMax, paper(func(p *proofbench.Paper) proofbench.PaperFigure { return p.PresenceBytes }))
	fmt.Fprintf(w, "  %-28s %10s %10.1f %10d  %s\n", "absence + det. sig (bytes)", "", r.AbsenceSignedBytesAvg, r.AbsenceSignedBytesMax, paper(func(p *proofbench.Paper) proofbench.PaperFigure { return p.AbsenceBytes }))
	fmt.Fprintf(w, "  signed checkpoint note: %d bytes; signed sorted-tree head, as provers serve it: %d bytes (fetched once per root)\n", r.CheckpointBytes, r.HeadBytes)
	fmt.Fprintf(w, "  ceilings: SHA-256 path of %d hashes %.2f us, Ed25519 verify %.1f us (p50)\n", r.Depth, r.CeilingPathUsP50, r.CeilingEd25519UsP50)
	if p != nil {
		fmt.Fprintln(w, "  the paper's verification opens one signed root, as the + sig rows do; its sizes appear to include the signed root,")
		fmt.Fprintln(w, "  as + det. sig does (docs/benchmarks.md, \"Proofs: sorted Merkle trees\")")
	}
}

// benchReport is a benchmark's result that prints itself and draws its
// plots.
type benchReport interface {
	WriteText(w io.Writer)
	SavePlots(dest string) ([]string, error)
}

// writeBenchReport prints r as text or JSON, then draws its plots at dest
// (a directory or a file prefix, as the benchmark's flag says). Results
// come first: a plot that cannot be written must not lose the run.
func writeBenchReport(env *command.Env, cmd, flag string, r benchReport, asJSON bool, dest string) error {
	var err error
	if asJSON {
		err = command.WriteJSON(env.Stdout, r)
	} else {
		r.WriteText(env.Stdout)
	}
	if err != nil || dest == "" {
		return err
	}
	files, err := r.SavePlots(dest)
	for _, f := range files {
		fmt.Fprintf(env.Stderr, "%s: wrote %s\n", cmd, f)
	}
	if err != nil {
		return fmt.Errorf("%s: %w (the results above are complete)", flag, err)
	}
	return nil
}

// thousands renders n with thousands separators, as the papers print key
// counts (2,129,920).
func thousands(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
