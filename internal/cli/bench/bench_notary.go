package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/notarybench"
)

func runBenchNotary(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench notary", "[--duration D] [--concurrency N] [--samples N] [--json]")
	d := fs.Duration("duration", 5*time.Second, "length of each throughput phase")
	conc := fs.Int("concurrency", 64, "concurrent clients in the throughput phases")
	samples := fs.Int("samples", 30, "latency samples per Table 4 row")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *conc < 1 || *samples < 1 || *d <= 0 {
		return command.UsageError("--duration, --concurrency and --samples must be positive")
	}
	r, err := notarybench.Run(ctx, notarybench.Options{Duration: *d, Concurrency: *conc, Samples: *samples, Progress: env.Stderr})
	if err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, r)
	}
	w := env.Stdout
	fmt.Fprintf(w, "%-28s %10s %8s %8s %8s %6s\n", "throughput", "req/s", "p50 ms", "p99 ms", "503 %", "errors")
	for _, s := range []notarybench.Stats{r.Cached, r.CachedCeiling, r.Uncached, r.UncachedCeil} {
		fmt.Fprintf(w, "%-28s %10.0f %8.2f %8.2f %8.2f %6d\n", s.Name, s.PerSecond, s.P50ms, s.P99ms, 100*s.Rate503, s.Errors)
	}
	fmt.Fprintf(w, "cached / ceiling   = %.2f   (Forced Perspectives' notary: %.0f req/s cached on 8 cores)\n", r.CachedRatio, r.PaperCachedRPS)
	fmt.Fprintf(w, "uncached / ceiling = %.2f   (Forced Perspectives' notary: %.0f req/s uncached)\n\n", r.UncachedRatio, r.PaperUncachedRPS)
	fmt.Fprintf(w, "%-20s %8s %7s %8s %8s %8s %9s\n", "client latency", "notaries", "RTT ms", "p50 ms", "p99 ms", "mean ms", "paper ms")
	for _, l := range r.Latency {
		fmt.Fprintf(w, "%-20s %8d %7.0f %8.1f %8.1f %8.1f %9.0f\n", l.Event, l.Notaries, l.RTTms, l.P50ms, l.P99ms, l.MeanMS, l.PaperMS)
	}
	return nil
}
