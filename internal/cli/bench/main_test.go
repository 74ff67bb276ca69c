package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/cli/command"
)

// The tests drive this package's commands through a command line, as
// internal/cli does with every family's; tests that need commands of
// several families live in internal/cli.

type Env = command.Env

const (
	ExitOK       = command.ExitOK
	ExitNegative = command.ExitNegative
	ExitUsage    = command.ExitUsage
)

// Main runs one of this package's commands.
func Main(ctx context.Context, env *Env, args []string) int {
	return command.Main(ctx, env, Commands(), args)
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code := Main(t.Context(), env, args)
	return code, out.String(), errb.String()
}
