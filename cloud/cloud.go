// Package cloud builds a PEC cloud binary: the cloud of "Towards Sustainable
// Evolution for the TLS PKI" (the PEC paper), hosting pkie's built-in
// enhancements and any an operator registers beside them, with the
// commands, flags, data directory and bundles of `pkie cloud`
// (docs/operations/cloud.md).
//
// An enhancement written outside this module (docs/guides/pkie-howto.md)
// is hosted by a main of a few lines:
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//		reg := cloud.BuiltinRegistry()
//		if err := reg.Register(domainpolicy.Kind()); err != nil {
//			log.Fatal(err)
//		}
//		code := cloud.Main(ctx, os.Args[1:], reg)
//		stop()
//		os.Exit(code)
//	}
//
// and run as `pkie cloud` is: `mycloud init --pkie domain-policy=policy.json`,
// `mycloud serve`, `mycloud bundle`. Its clients register the same Kind in
// the registry they give check or pec (check.BuiltinRegistry).
package cloud

import (
	"context"
	"io"
	"os"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/cli/serve"
	"github.com/pkie/pkie/internal/provers"
)

// BuiltinRegistry returns a new registry holding pkie's built-in
// enhancements, ct, revocation and notary, each with its prover and its
// verifier. Each call returns a registry of its own: register your
// enhancements in it beside the built-ins, then give it to Main.
func BuiltinRegistry() *pkie.Registry { return provers.Registry() }

// Main runs the cloud command named by args[0] (init, serve or bundle,
// with the flags of `pkie cloud`) hosting the enhancements of reg, writes
// to the process's standard output and error, and returns the exit status
// (0 done, 2 bad usage or an operational error). serve runs until ctx is
// done. An enhancement is looked up in reg by name or identifier wherever
// the commands take one (init's --pkie, cloud.json), and must have a
// prover to be hosted. A nil reg means BuiltinRegistry().
func Main(ctx context.Context, args []string, reg *pkie.Registry) int {
	return Run(ctx, args, os.Stdout, os.Stderr, reg)
}

// Run is Main writing to stdout and stderr: for tests and for programs
// that run the cloud beside other work.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, reg *pkie.Registry) int {
	if reg == nil {
		reg = BuiltinRegistry()
	}
	env := &command.Env{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv}
	// The serving family alone: a cloud binary links none of the
	// measurement toolkit, the benchmarks or the testbed.
	return command.ReportExit(env, "cloud", serve.CloudWith(ctx, env, args, reg))
}
