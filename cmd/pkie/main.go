// Command pkie checks TLS certificates on more evidence than one CA
// signature: multi-path notaries, transparency and revocation proofs, and the
// measurement tools that evaluate them. Run "pkie help" for the subcommands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pkie/pkie/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.OSEnv(), os.Args[1:])
	stop()
	os.Exit(code)
}
