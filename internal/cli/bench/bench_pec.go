package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/pecbench"
)

func runBenchPEC(ctx context.Context, env *command.Env, args []string) error {
	if mode := studyMode(args); mode != "" {
		return runBenchPECStudy(ctx, env, mode, args)
	}
	fs := command.NewFlags(env, "bench pec", "[--placements | --cost] [--rows LIST] [--duration D] [--sessions N] [--window N] [--plot PREFIX] [--json]")
	// Handled by studyMode before parsing; declared so that -h lists them.
	fs.Bool("placements", false, "run the latency study on the PEC paper's 14 data centres instead (pkie bench pec --placements -h)")
	fs.Bool("cost", false, "recompute the PEC paper's Table 3 from a measured throughput row instead (pkie bench pec --cost -h)")
	rows := fs.String("rows", "all", "rows to measure: all, or a comma-separated list of "+strings.Join(pecbench.AllRows, ", "))
	sessions := fs.Int("sessions", 64, "throughput: concurrent client sessions")
	window := fs.Int("window", 8, "throughput: submissions in flight per session")
	duration := fs.Duration("duration", 5*time.Second, "throughput: counted length of each run")
	warmup := fs.Duration("warmup", time.Second, "throughput: uncounted start of each run")
	transport := fs.String("transport", "quic", "throughput: quic or tcp")
	rounds := fs.Int("rounds", 2, "throughput: runs of each of the ceiling and the cloud, alternating; the best of each is reported")
	ctLeaves := fs.Uint64("ct-leaves", pecbench.PaperCTLeaves, "client cost: keys in the CT-scale tree (the PEC paper's log: 2,129,920)")
	revoked := fs.Uint64("revoked", pecbench.PaperRevokedLeaves, "client cost: keys in the revocation-scale tree (the PEC paper's CRL: 53,164)")
	keys := fs.Int("keys", 1000, "client cost: random keys proved per tree (>= 1000)")
	dir := fs.String("dir", "", "client cost: directory for the temporary tree files (default: the system temp dir)")
	logFill := fs.Int("log-fill", 4095, "certificates logged besides the site's, so CT proofs have realistic depth")
	revokedFill := fs.Int("revoked-fill", pecbench.PaperRevokedLeaves, "serials revoked (the PEC paper's CRL: 53,164)")
	serverRTTs := fs.String("server-rtts", "10ms,50ms,100ms", "latency: client–server round trips")
	cloudRTTs := fs.String("cloud-rtts", "10ms,50ms,100ms", "latency: client–cloud round trips")
	handshakes := fs.Int("handshakes", 20, "latency: handshakes with and without PEC per placement")
	trials := fs.Int("trials", 10, "failover and blocked: trials per case")
	loss := fs.Float64("loss", 0.2, "loss: fraction of datagrams dropped each way")
	lossSamples := fs.Int("loss-samples", 200, "loss: submissions timed with and without loss")
	plot := fs.String("plot", "", "write the latency and loss plots to PREFIX-latency.svg/.png and PREFIX-loss.svg/.png")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	cfg := pecbench.Config{Sessions: *sessions, Window: *window, Duration: *duration, Warmup: *warmup, Transport: *transport, Rounds: *rounds,
		CTLeaves: *ctLeaves, RevokedLeaves: *revoked, Samples: *keys, Dir: *dir, LogFill: *logFill, RevokedFill: *revokedFill, Progress: command.PrefixWriter{Env: env, Prefix: "bench pec: "}}
	if *rows != "all" {
		for _, r := range strings.Split(*rows, ",") {
			cfg.Rows = append(cfg.Rows, strings.TrimSpace(r))
		}
	}
	if *sessions < 1 || *window < 1 || *rounds < 1 || *duration <= 0 || *warmup < 0 {
		return command.UsageError("--sessions, --window and --rounds must be at least 1, --duration positive")
	}
	if *ctLeaves == 0 || *revoked == 0 {
		return command.UsageError("--ct-leaves and --revoked must be at least 1")
	}
	if *logFill < 0 || *revokedFill < 0 || *logFill > 1<<20 || *revokedFill > 1<<24 {
		return command.UsageError("--log-fill must be 0 to %d and --revoked-fill 0 to %d", 1<<20, 1<<24)
	}
	// In the Config zero means the default and a negative count none.
	if *logFill == 0 {
		cfg.LogFill = -1
	}
	if *revokedFill == 0 {
		cfg.RevokedFill = -1
	}
	if err := cfg.Check(); err != nil {
		return command.UsageError("%v", err)
	}
	if *handshakes < 1 || *trials < 1 || *lossSamples < 1 {
		return command.UsageError("--handshakes, --trials and --loss-samples must be at least 1")
	}
	if *loss <= 0 || *loss >= 1 {
		return command.UsageError("--loss must be above 0 and below 1")
	}
	if cfg.ServerRTTs, err = parseDurations("--server-rtts", *serverRTTs); err != nil {
		return err
	}
	if cfg.CloudRTTs, err = parseDurations("--cloud-rtts", *cloudRTTs); err != nil {
		return err
	}
	cfg.Handshakes, cfg.Trials, cfg.Loss, cfg.LossSamples = *handshakes, *trials, *loss, *lossSamples
	if err := command.CheckOutput("--plot", *plot); err != nil {
		return err
	}
	if err := command.CheckOutput("--cpuprofile", *cpuprofile); err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	restore := command.QuietStorage(env)
	r, err := pecbench.Run(ctx, cfg)
	restore()
	if err != nil {
		return err
	}
	// Results first: a plot that cannot be written must not lose the run.
	if *asJSON {
		err = command.WriteJSON(env.Stdout, r)
	} else {
		r.WriteText(env.Stdout)
	}
	if err != nil || *plot == "" {
		return err
	}
	files, err := r.SavePlots(*plot)
	if err != nil {
		return fmt.Errorf("--plot: %w (the results above are complete)", err)
	}
	for _, f := range files {
		fmt.Fprintf(env.Stderr, "bench pec: wrote %s\n", f)
	}
	return nil
}

// parseDurations parses a comma-separated list of positive durations.
func parseDurations(flag, s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 || d > time.Minute {
			return nil, command.UsageError("%s: %q is not a duration between 0 and 1m", flag, f)
		}
		out = append(out, d)
	}
	return out, nil
}
