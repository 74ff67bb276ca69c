package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/ctbench"
)

func runBenchCT(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "bench ct", "[--entries N] [--data DIR] [--parallel P] [--chains C] [--concurrency K] [--tesseract PATH] [--json]")
	entries := fs.Uint64("entries", 100_000_000, "entries in the synthetic static-ct-api log")
	data := fs.String("data", "", "directory of the synthetic log, reused if it holds one of --entries entries (default: pkie-ct-synth-N in the system temp dir)")
	work := fs.String("work", "", "directory for the mirror's state and tree during the run (default: --data)")
	parallel := fs.Int("parallel", 4, "concurrent tile fetches, for the ceiling and the mirror alike")
	ceiling := fs.Uint64("ceiling-entries", 10_000_000, "measure the ingest ceiling over the log's first this many entries (0: all)")
	samples := fs.Int("keys", 1000, "present and as many absent keys to prove (>= 1000)")
	chains := fs.Int("chains", 2000, "distinct chains submitted to pkie's log and to TesseraCT (0: skip add-chain)")
	concurrency := fs.Int("concurrency", 64, "concurrent add-chain clients, the same for both logs")
	tesseract := fs.String("tesseract", "", "TesseraCT's POSIX binary (default: $PKIE_TESSERACT, tesseract-posix on PATH, or $(go env GOPATH)/opt/tesseract-v0.1.1/posix)")
	noMirror := fs.Bool("no-mirror", false, "skip the mirror (ceilings, proofs and add-chain only)")
	inProcess := fs.Bool("in-process", false, "run the mirror in this process rather than a child (its peak RSS is then not its own)")
	generateOnly := fs.Bool("generate-only", false, "generate (or check) the synthetic log in --data and stop")
	child := fs.Bool("mirror-child", false, "internal: be the mirror child, reading its job from stdin")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return command.UsageError("unexpected argument %q", pos[0])
	}
	if *child {
		return ctbench.MirrorChild(ctx, env.Stdin, env.Stdout, env.Stderr)
	}
	if *entries == 0 || *entries >= 1<<40 {
		return command.UsageError("--entries must be between 1 and 2^40-1")
	}
	if *samples < 1000 {
		return command.UsageError("--keys must be at least 1000 (got %d)", *samples)
	}
	if *parallel < 1 || *parallel > 256 {
		return command.UsageError("--parallel must be between 1 and 256")
	}
	if *chains < 0 || *chains == 1 || *concurrency < 1 || *concurrency > 4096 {
		return command.UsageError("--chains must be 0 or at least 2, and --concurrency between 1 and 4096")
	}
	if *data == "" {
		*data = filepath.Join(os.TempDir(), "pkie-ct-synth-"+strconv.FormatUint(*entries, 10))
	}
	if *tesseract == "" {
		*tesseract = ctbench.TesseraCTBinary()
	}
	if *generateOnly {
		l, reused, err := ctbench.OpenOrGenerate(ctx, *data, *entries, command.PrefixWriter{Env: env, Prefix: "bench ct: "})
		if err != nil {
			return err
		}
		defer l.Close()
		verb := "generated"
		if reused {
			verb = "found"
		}
		fmt.Fprintf(env.Stdout, "%s a synthetic log of %d entries in %s (generation took %.1f s; hash tiles %.2f GB)\n", verb, l.Entries(), *data, l.GenerateSeconds(), float64(l.HashBytes())/1e9)
		return nil
	}
	c := ctbench.Config{Entries: *entries, DataDir: *data, WorkDir: *work, Parallel: *parallel, CeilingEntries: *ceiling, Samples: *samples,
		SkipMirror: *noMirror, Chains: *chains, Concurrency: *concurrency, TesseraCT: *tesseract,
		Progress: command.PrefixWriter{Env: env, Prefix: "bench ct: "}}
	if !*inProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench ct: finding this binary to run the mirror child: %w", err)
		}
		c.MirrorArgv = []string{exe, "bench", "ct", "--mirror-child"}
	}
	r, err := ctbench.Run(ctx, c)
	if err != nil {
		return err
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, r)
	}
	r.WriteText(env.Stdout)
	return nil
}
