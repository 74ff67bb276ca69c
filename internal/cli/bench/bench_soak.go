package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/soak"
)

func runBenchSoak(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench soak", "[--duration D] [--rate R] [--attacks LIST] [--plot FILE.svg] [--json]")
	d := fs.Duration("duration", 3*time.Minute, "length of the whole run (baseline, each attack alone, all together, recovery)")
	rate := fs.Float64("rate", 20, "good requests per second, over the notary and the log")
	attacks := fs.String("attacks", "all", "attacks to run: all, none, or a comma-separated list of "+strings.Join(soak.Attacks, ", "))
	plot := fs.String("plot", "", "also draw good-request latency over time, with the phases, to this file (.svg, .png, .pdf)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	if *d < time.Second || *d > 24*time.Hour {
		return command.UsageError("--duration must be between 1s and 24h")
	}
	if *rate <= 0 || *rate > 1000 {
		return command.UsageError("--rate must be above 0 and at most 1000")
	}
	if *rate*d.Seconds() > 1e6 {
		return command.UsageError("--rate × --duration must stay under a million good requests")
	}
	list, err := soak.ParseAttacks(*attacks)
	if err != nil {
		return command.UsageError("--attacks: %v", err)
	}
	named := strings.Join(list, ", ")
	if len(list) == 0 {
		named = "none"
	}
	fmt.Fprintf(env.Stderr, "bench soak: %v at %g good req/s; attacks: %s\n", *d, *rate, named)
	restore := command.QuietStorage(env)
	defer restore()
	r, err := soak.Run(ctx, soak.Options{Duration: *d, Rate: *rate, Attacks: list, Progress: command.PrefixWriter{Env: env, Prefix: "bench soak: "}})
	if err != nil {
		return err
	}
	if *plot != "" {
		if err := r.SavePlot(*plot); err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "bench soak: wrote %s\n", *plot)
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, r)
	}
	r.WriteText(env.Stdout)
	return nil
}
