package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/obcbench"
)

func runBenchOBC(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench obc", "[--rows LIST] [--algs LIST] [--cases LIST] [--rate R] [--duration D] [--plot PREFIX] [--json]")
	rows := fs.String("rows", "all", "rows to measure: all, or a comma-separated list of "+strings.Join(obcbench.AllRows, ", "))
	algs := fs.String("algs", strings.Join(obcbench.Algs, ","), "gen and fetch: client key algorithms")
	genSamples := fs.Int("gen-samples", 20, "gen: keys and certificates made per algorithm")
	rtt := fs.Duration("rtt", 50*time.Millisecond, "fetch: the delay proxy's round trip")
	fetchSamples := fs.Int("fetch-samples", 20, "fetch: fetches per case (no OBC; first, pooled first and return visit per algorithm)")
	pageBytes := fs.Int("page-bytes", 48<<10, "fetch: the page's size")
	cases := fs.String("cases", strings.Join(obcbench.TerminatorCases, ","), "terminator: client keys, none for no client certificate")
	rate := fs.Float64("rate", 200, "terminator: requests per second, open loop (the paper: 3,000 on a data-centre machine)")
	duration := fs.Duration("duration", 30*time.Second, "terminator: measured window per case (the paper: 5 minutes)")
	warmup := fs.Duration("warmup", 5*time.Second, "terminator: uncounted start of each case")
	resumed := fs.Float64("resumed", 0.8, "terminator: share of requests on resumed TLS sessions (the paper: 80%)")
	clients := fs.Int("clients", 32, "terminator: simulated clients, each with its own key and session cache")
	ceiling := fs.Duration("ceiling", 5*time.Second, "terminator: length of the raw-handshake ceiling run")
	seed := fs.Uint64("seed", 1, "terminator: seed of the request mix")
	inProcess := fs.Bool("in-process", false, "terminator: run it in this process instead of a child (its CPU and memory then include the load generator's)")
	from := fs.String("from", "", "measure nothing: print (and with --plot draw) the report a --json run saved in this file")
	plot := fs.String("plot", "", "write the plots to PREFIX-NAME.svg and .png")
	asJSON := fs.Bool("json", false, "print one JSON object")
	// Child mode: the terminator alone, driven over stdin and stdout by
	// the parent benchmark.
	child := fs.Bool("terminator-only", false, "run only a TLS terminator, driven by a parent pkie bench obc over stdin and stdout")
	backend := fs.String("backend", "", "terminator-only: the backend's host:port")
	clientAuth := fs.String("client-auth", "none", "terminator-only: none, or request (ask for any client certificate, as a TLS-OBC server)")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	if *child {
		if *clientAuth != "none" && *clientAuth != "request" {
			return command.UsageError("--client-auth must be none or request")
		}
		if env.Stdin == nil {
			return command.UsageError("--terminator-only reads its commands from stdin, and there is none")
		}
		return obcbench.ServeChild(ctx, obcbench.TerminatorOptions{Backend: *backend, ClientAuth: *clientAuth == "request"}, env.Stdin, env.Stdout)
	}
	cfg := obcbench.Config{GenSamples: *genSamples, RTT: *rtt, FetchSamples: *fetchSamples, PageBytes: *pageBytes, Cases: command.SplitList(*cases), Algs: command.SplitList(*algs), Rate: *rate, Duration: *duration,
		Warmup: *warmup, Resumed: *resumed, Clients: *clients, CeilingDuration: *ceiling, Seed: *seed, Progress: command.PrefixWriter{Env: env, Prefix: "bench obc: "}}
	if *rows != "all" {
		cfg.Rows = command.SplitList(*rows)
	}
	switch {
	case *genSamples < 1, *clients < 1, *fetchSamples < 1, *pageBytes < 1:
		return command.UsageError("--gen-samples, --fetch-samples, --page-bytes and --clients must be at least 1")
	case *rate <= 0 || *duration <= 0 || *ceiling <= 0 || *rtt <= 0:
		return command.UsageError("--rate, --duration, --ceiling and --rtt must be positive")
	case *resumed < 0 || *resumed >= 1:
		return command.UsageError("--resumed must be at least 0 and below 1")
	}
	if *resumed == 0 {
		cfg.Resumed = -1 // every request fresh; the Config's zero is the default
	}
	if err := cfg.Check(); err != nil {
		return command.UsageError("%v", err)
	}
	if err := command.CheckOutput("--plot", *plot); err != nil {
		return err
	}
	if *from != "" {
		b, err := os.ReadFile(*from)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		var r obcbench.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("--from %s: not a pkie bench obc --json report: %w", *from, err)
		}
		return writeBenchReport(env, "bench obc", "--plot", &r, *asJSON, *plot)
	}
	if !*inProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench obc: finding pkie to start the terminator: %w (use --in-process)", err)
		}
		cfg.Exec = []string{exe, "bench", "obc", "--terminator-only"}
	}
	r, err := obcbench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return writeBenchReport(env, "bench obc", "--plot", r, *asJSON, *plot)
}
