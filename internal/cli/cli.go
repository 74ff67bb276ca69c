// Package cli is pkie's command table: it names every command and runs the
// one a command line asks for. The commands live in family packages built
// on internal/cli/command: serve (the serving roles), client (checking),
// measure (the measurement toolkit) and bench (benchmarks and the demo).
package cli

import (
	"context"

	"github.com/pkie/pkie/internal/cli/bench"
	"github.com/pkie/pkie/internal/cli/client"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/cli/measure"
	"github.com/pkie/pkie/internal/cli/serve"
)

// Exit codes shared by every command.
const (
	ExitOK       = command.ExitOK
	ExitNegative = command.ExitNegative // the check ran and the answer is "no" (e.g. not trusted)
	ExitUsage    = command.ExitUsage    // bad usage or an operational error
)

// Env is what a command may touch of the outside world (command.Env).
type Env = command.Env

// OSEnv returns the process's real environment.
func OSEnv() *Env { return command.OSEnv() }

const obcUsage = "Usage: pkie obc <subcommand> [flags]\n\nOrigin-bound client certificates (TLS-OBC): one self-signed key per web origin,\nmade on first contact and presented as the TLS client certificate.\n\nSubcommands:"

// commands lists every command: each family's, then obc, whose
// subcommands come from two families, and version.
func commands() []command.Command {
	var cs []command.Command
	cs = append(cs, client.Commands()...)
	cs = append(cs, serve.Commands()...)
	cs = append(cs, measure.Commands()...)
	cs = append(cs, bench.Commands()...)
	return append(cs,
		ctCommands(),
		command.Group("obc", "origin-bound client certificates: get | list | forget | serve", obcUsage,
			append(client.OBCCommands(), serve.OBCServeCommand)),
		command.Command{Name: "version", Summary: "print pkie's version and the revision it was built from", Run: runVersion},
	)
}

// Main runs the command named by args[0] and returns the process exit code.
func Main(ctx context.Context, env *Env, args []string) int {
	return command.Main(ctx, env, commands(), args)
}
