package ctinterop

import (
	"bytes"
	"context"
	"strings"

	"github.com/pkie/pkie/internal/cli"
)

// runPKIE runs the pkie command line in-process, as internal/cli's tests
// do, and returns its exit code, standard output and standard error.
func runPKIE(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	env := &cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code := cli.Main(ctx, env, args)
	return code, out.String(), errb.String()
}
