package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/replay/report"
)

// replayReportJSON is what pkie replay report --json prints: the report
// and the plot files written.
type replayReportJSON struct {
	*report.Report
	Plots []string `json:"plots,omitempty"`
}

func replayReport(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "replay report", "[flags] RECORD|-")
	schedule := fs.String("schedule", "", "the schedule the run replayed (default: the path the record names, as given to pkie replay run, or beside the record)")
	asJSON := fs.Bool("json", false, "print the whole report as one JSON object")
	plots := fs.String("plots", "", "write Figures 2–5 into this directory as SVG and PNG")
	localCost := fs.Duration("local-cost", 0, "L_client of the measured expected delay: what a connection whose certificate the client has cached costs (the run sends nothing for it; the paper measured 108ms)")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return command.UsageError("want one run RECORD (or - for stdin); run \"pkie replay report -h\"")
	}
	if *localCost < 0 {
		return command.UsageError("--local-cost must not be negative")
	}
	in, closeIn, err := openTrace(env, pos[0], nil)
	if err != nil {
		return err
	}
	defer closeIn()
	open := func(h *replay.RunHeader) (io.ReadCloser, error) {
		path := *schedule
		if path == "" {
			path = scheduleBesideRecord(h.Schedule, pos[0])
			if path == "" {
				return nil, errors.New("the record names no schedule; give it with --schedule")
			}
		}
		r, closeFn, err := openTrace(env, path, nil)
		if err != nil {
			if *schedule == "" {
				return nil, fmt.Errorf("%w (give the schedule with --schedule)", err)
			}
			return nil, err
		}
		return readCloser{r, closeFn}, nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	rep, err := report.Build(in, open, report.Options{LocalCost: *localCost})
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	var files []string
	if *plots != "" {
		if files, err = report.WritePlots(*plots, rep); err != nil {
			return err
		}
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, replayReportJSON{Report: rep, Plots: files})
	}
	if err := report.WriteText(env.Stdout, rep); err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintf(env.Stderr, "pkie replay report: wrote %s\n", f)
	}
	return nil
}

// scheduleBesideRecord finds the schedule a record names: at its path as
// given to pkie replay run (relative to where that ran) if it is there,
// else by its name in the record's directory, where the two usually sit.
func scheduleBesideRecord(named, record string) string {
	if named == "" || named == "-" {
		return ""
	}
	if _, err := os.Stat(named); err == nil || filepath.IsAbs(named) || record == "-" {
		return named
	} else if !errors.Is(err, fs.ErrNotExist) {
		return named
	}
	beside := filepath.Join(filepath.Dir(record), filepath.Base(named))
	if _, err := os.Stat(beside); err == nil {
		return beside
	}
	return named
}

type readCloser struct {
	io.Reader
	close func()
}

func (r readCloser) Close() error { r.close(); return nil }
