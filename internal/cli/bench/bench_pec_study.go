package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"os"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/pecbench"
)

// studyMode returns "placements" or "cost" when args ask for one of the
// studies `pkie bench pec` runs instead of its rows, or "".
func studyMode(args []string) string {
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case "placements", "placements=true":
			return "placements"
		case "cost", "cost=true":
			return "cost"
		}
		if a == "--" {
			break
		}
	}
	return ""
}

func runBenchPECStudy(ctx context.Context, env *command.Env, mode string, args []string) error {
	if mode == "cost" {
		return runBenchPECCost(ctx, env, args)
	}
	return runBenchPECPlacements(ctx, env, args)
}

// studyFlags names pecbench.StudyConfig's fields as bench pec
// --placements's flags do.
var studyFlags = map[string]string{
	"Random": "--random", "Nearest": "--nearest", "Footprint": "--footprint", "Reps": "--reps", "Versions": "--tls",
	"Scale": "--scale", "FibreFactor": "--fibre-factor", "PoPRTT": "--pop-rtt", "LogFill": "--log-fill", "RevokedFill": "--revoked-fill",
}

func runBenchPECPlacements(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench pec", "--placements [--random N] [--nearest N] [--footprint N] [--reps N] [--scale F] [--plot PREFIX] [--json]")
	fs.Bool("placements", true, "run the latency study (the PEC paper §6.2 and §6.3.1) instead of the rows")
	random := fs.Int("random", pecbench.DefaultPlacements, "placements with client, server and cloud in three random regions (0: none)")
	nearest := fs.Int("nearest", pecbench.DefaultPlacements, "placements with the cloud in the region nearest the client (the paper's smart model; 0: none)")
	footprint := fs.Int("footprint", pecbench.DefaultPlacements, "placements with a point of presence next to every client (the paper's Akamai case; 0: none)")
	reps := fs.Int("reps", 5, "measured handshakes per placement, TLS version and mode (the mean is used)")
	versions := fs.String("tls", "1.2,1.3", "TLS versions to measure")
	scale := fs.Float64("scale", 10, "divide every round trip by this on loopback (relative inflation is scale-free; processing weighs this much more)")
	fibre := fs.Float64("fibre-factor", pecbench.DefaultFibreFactor, "fibre route length over the great-circle distance")
	popRTT := fs.Duration("pop-rtt", pecbench.DefaultPoPRTT, "large footprint: the client's round trip to its point of presence, at real scale")
	seed := fs.Uint64("seed", 2017, "seed for the placements")
	logFill := fs.Int("log-fill", 4095, "certificates logged besides the site's")
	revokedFill := fs.Int("revoked-fill", pecbench.PaperRevokedLeaves, "serials revoked (the PEC paper's CRL: 53,164)")
	plot := fs.String("plot", "", "write the inflation CDFs to PREFIX-fig5-tls12.svg/.png, PREFIX-fig6-tls13.svg/.png, …")
	from := fs.String("from", "", "print and plot a study saved with --json instead of running one")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	if *from != "" {
		if err := command.CheckOutput("--plot", *plot); err != nil {
			return err
		}
		f, err := os.Open(*from)
		if err != nil {
			return command.UsageError("--from: %v", err)
		}
		st, err := pecbench.LoadStudy(f)
		f.Close()
		if err != nil {
			return command.UsageError("--from %s: %v", *from, err)
		}
		return writeBenchReport(env, "bench pec", "--plot", st, *asJSON, *plot)
	}
	cfg := pecbench.StudyConfig{Random: *random, Nearest: *nearest, Footprint: *footprint, Reps: *reps, Scale: *scale, FibreFactor: *fibre,
		PoPRTT: *popRTT, Seed: *seed, LogFill: *logFill, RevokedFill: *revokedFill, Progress: command.PrefixWriter{Env: env, Prefix: "bench pec: "}}
	for _, v := range strings.Split(*versions, ",") {
		switch strings.TrimSpace(v) {
		case "1.2":
			cfg.Versions = append(cfg.Versions, tls.VersionTLS12)
		case "1.3":
			cfg.Versions = append(cfg.Versions, tls.VersionTLS13)
		default:
			return command.UsageError("--tls: %q is not 1.2 or 1.3", v)
		}
	}
	if err := command.OptionError(cfg.Validate(), studyFlags); err != nil {
		return err
	}
	// To RunStudy a zero fill means the default: here it means none.
	for _, f := range []*int{&cfg.LogFill, &cfg.RevokedFill} {
		if *f == 0 {
			*f = -1
		}
	}
	if err := command.CheckOutput("--plot", *plot); err != nil {
		return err
	}
	restore := command.QuietStorage(env)
	st, err := pecbench.RunStudy(ctx, cfg)
	restore()
	if err != nil {
		return err
	}
	return writeBenchReport(env, "bench pec", "--plot", st, *asJSON, *plot)
}

func runBenchPECCost(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench pec", "--cost [--from REPORT.json | --duration D --sessions N --window N] [--vcpus N] [--json]")
	fs.Bool("cost", true, "recompute the PEC paper's Table 3 (§6.3.2) from a measured throughput row instead of running the rows")
	from := fs.String("from", "", "take the throughput row from this `pkie bench pec --json` output instead of measuring it")
	vcpus := fs.Int("vcpus", pecbench.PaperMachineVCPUs, "cores of the machine whose rate is costed (the paper's t2.medium: 2)")
	sessions := fs.Int("sessions", 64, "throughput: concurrent client sessions")
	window := fs.Int("window", 8, "throughput: submissions in flight per session")
	duration := fs.Duration("duration", 5*time.Second, "throughput: counted length of each run")
	warmup := fs.Duration("warmup", time.Second, "throughput: uncounted start of each run")
	transport := fs.String("transport", "quic", "throughput: quic or tcp")
	rounds := fs.Int("rounds", 2, "throughput: runs of each of the ceiling and the cloud, alternating; the best of each is used")
	logFill := fs.Int("log-fill", 4095, "certificates logged besides the site's, so CT proofs have realistic depth")
	revokedFill := fs.Int("revoked-fill", pecbench.PaperRevokedLeaves, "serials revoked (the PEC paper's CRL: 53,164)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	if *vcpus < 1 || *vcpus > 1024 {
		return command.UsageError("--vcpus must be 1 to 1024")
	}
	var row *pecbench.ThroughputRow
	if *from != "" {
		b, err := os.ReadFile(*from)
		if err != nil {
			return command.UsageError("--from: %v", err)
		}
		var rep pecbench.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return command.UsageError("--from %s: not a `pkie bench pec --json` report: %v", *from, err)
		}
		if rep.Throughput == nil {
			return command.UsageError("--from %s: the report has no throughput row (run `pkie bench pec --rows throughput --json`)", *from)
		}
		row = rep.Throughput
	} else {
		if *sessions < 1 || *window < 1 || *rounds < 1 || *duration <= 0 {
			return command.UsageError("--sessions, --window and --rounds must be at least 1, --duration positive")
		}
		if *logFill < 0 || *revokedFill < 0 || *logFill > 1<<20 || *revokedFill > 1<<24 {
			return command.UsageError("--log-fill must be 0 to %d and --revoked-fill 0 to %d", 1<<20, 1<<24)
		}
		cfg := pecbench.Config{Rows: []string{pecbench.RowThroughput}, Sessions: *sessions, Window: *window, Duration: *duration, Warmup: *warmup,
			Transport: *transport, Rounds: *rounds, LogFill: *logFill, RevokedFill: *revokedFill, Progress: command.PrefixWriter{Env: env, Prefix: "bench pec: "}}
		if *logFill == 0 {
			cfg.LogFill = -1
		}
		if *revokedFill == 0 {
			cfg.RevokedFill = -1
		}
		if err := cfg.Check(); err != nil {
			return command.UsageError("%v", err)
		}
		restore := command.QuietStorage(env)
		rep, err := pecbench.Run(ctx, cfg)
		restore()
		if err != nil {
			return err
		}
		row = rep.Throughput
	}
	c, err := pecbench.CostModel(row, *vcpus)
	if err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, c)
	}
	c.WriteText(env.Stdout)
	return nil
}
