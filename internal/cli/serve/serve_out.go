package serve

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/notary"
)

// What a serve command tells its operator: its startup information once it
// listens, its logs, and one line when it stops. With --json the startup
// information is one JSON object on one line of stdout (a script reads the
// ports and keys it needs from the first line) and the logs are JSON lines
// on stderr; without it, "listening ADDR" lines and text logs.

// serveLogger returns a serve command's logger, on stderr.
func serveLogger(env *command.Env, asJSON bool) *slog.Logger {
	if asJSON {
		return slog.New(slog.NewJSONHandler(env.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(env.Stderr, nil))
}

// printServing prints a serve command's startup information: info as one
// line of JSON with --json, else the text lines.
func printServing(env *command.Env, asJSON bool, info any, lines ...string) error {
	if asJSON {
		b, err := json.Marshal(info)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.Stdout, "%s\n", b)
		return err
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(env.Stdout, l); err != nil {
			return err
		}
	}
	return nil
}

// logStopped logs the line of a clean stop with its cause: the signal, when
// cmd/pkie cancelled ctx on SIGINT or SIGTERM. A service that ends without
// a word cannot be told from one that died.
func logStopped(logger *slog.Logger, role string, ctx context.Context) {
	cause := "stopped"
	if err := context.Cause(ctx); err != nil {
		cause = err.Error()
	}
	logger.Info(role+" stopped", "cause", cause)
}

// notaryKeys is what a notary's clients pin, as notary serve --json and
// notary bundle --json print it.
type notaryKeys struct {
	CertificateSHA256 string `json:"certificate_sha256"` // of the TLS certificate's DER, pinned by bundles
	V1Key             string `json:"pkie_v1_ed25519"`    // base64, as in the bundle
}

func keysOf(id *notary.Identity) notaryKeys {
	h := sha256.Sum256(id.Cert.Raw)
	return notaryKeys{
		CertificateSHA256: hex.EncodeToString(h[:]),
		V1Key:             base64.StdEncoding.EncodeToString(id.V1.Public().(ed25519.PublicKey)),
	}
}
