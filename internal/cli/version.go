package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/pkie/pkie/internal/cli/command"
)

// versionInfo is what pkie version reports, from the build information Go
// embeds in every binary.
type versionInfo struct {
	Module   string `json:"module"`
	Version  string `json:"version"`            // module version; "(devel)" for a build from a checkout
	Revision string `json:"revision,omitempty"` // VCS revision, when built from a repository
	Time     string `json:"time,omitempty"`     // its commit time
	Modified bool   `json:"modified,omitempty"` // built with uncommitted changes
	Go       string `json:"go"`
}

func runVersion(ctx context.Context, env *Env, args []string) error {
	fs := command.NewFlags(env, "version", "[--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return command.UsageError("version takes no arguments")
	}
	v := versionInfo{Module: "github.com/pkie/pkie", Version: "unknown", Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Module, v.Version = bi.Main.Path, bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, v)
	}
	fmt.Fprintf(env.Stdout, "pkie %s", v.Version)
	if v.Revision != "" {
		fmt.Fprintf(env.Stdout, " (revision %s", v.Revision)
		if v.Time != "" {
			fmt.Fprintf(env.Stdout, ", %s", v.Time)
		}
		if v.Modified {
			fmt.Fprint(env.Stdout, ", modified")
		}
		fmt.Fprint(env.Stdout, ")")
	}
	fmt.Fprintf(env.Stdout, ", %s\n", v.Go)
	return nil
}
