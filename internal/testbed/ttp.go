package testbed

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/prover"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/revocation"
)

// TTPOptions place the proof-based PKIEs' trusted third parties in the
// testbed.
type TTPOptions struct {
	// Dir holds the log's, the mirror's and the authority's directories;
	// empty means a temporary directory removed on Close.
	Dir string
	// Roots are the CAs whose roots the CT log accepts chains to (each
	// CA's Root is taken), as a real log's roots file lists them: LogChain
	// refuses a chain to any other root. Empty means a root of the TTPs'
	// own that issues nothing, for tests that log nothing.
	Roots []*CA
	// Now is every party's clock (log, mirror, authority, provers); nil
	// means time.Now. Tests move it to make roots stale.
	Now func() time.Time
	// ProverMaxAge is how old a revocation checkpoint the revocation
	// prover accepts at sync; zero means 24h.
	ProverMaxAge time.Duration
}

// TTPs is a CT log (internal/ctlog, static-ct-api on Tessera's POSIX
// storage), a CT mirror following it over its tiles as any prover follows
// any log (internal/provers/ct), a revocation authority and a prover
// server for both, each on its own loopback HTTP listener.
type TTPs struct {
	Log    *ctlog.Log
	LogURL string // the log's submission and static-ct-api monitoring prefix
	LogKey string // the log's RFC 6962 note verifier key, to pin
	// CTMirror follows the log over HTTP and signs the sorted tree of its
	// certificates with its own key: MirrorKey verifies those heads and
	// MirrorKeyFile is the signer key file (for more ct provers, see
	// CTProverConfig).
	CTMirror      *ctprover.Mirror
	MirrorKey     string
	MirrorKeyFile string
	Revocation    *revocation.Authority
	RevocationURL string
	RevocationKey string
	RevProver     *prover.Prover
	// ProverURL serves /v1/ct and /v1/revocation proofs, and the mirror's
	// head and tree under /ct/ as pkie prover serve does.
	ProverURL string

	servers []*http.Server
	tempDir string
}

// StartTTPs starts the log, the mirror, the authority and the prover
// server. The provers are not synced: call Refresh after adding
// certificates or revocations.
func StartTTPs(o TTPOptions) (_ *TTPs, err error) {
	t := &TTPs{} // not the named result, which an error return sets to nil before the cleanup runs
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	ctx := context.Background()
	if len(o.Roots) == 0 {
		own, err := NewRootCA("pkie testbed CT log root", ECDSAP256)
		if err != nil {
			return nil, err
		}
		o.Roots = []*CA{own}
	}
	var roots []byte
	for _, ca := range o.Roots {
		roots = append(roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Root().Cert.Raw})...)
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pkie-ttp-"); err != nil {
			return nil, err
		}
		t.tempDir = dir
	}
	logDir, mirrorDir, revDir := filepath.Join(dir, "log"), filepath.Join(dir, "ctmirror"), filepath.Join(dir, "revocation")
	if t.LogKey, err = ctlog.Init(ctx, logDir, "pkie.test/log", ctlog.InitOptions{Roots: roots}); err != nil {
		return nil, err
	}
	if t.Log, err = ctlog.Open(ctx, logDir, ctlog.Options{Now: o.Now, BatchMaxAge: 10 * time.Millisecond}); err != nil {
		return nil, err
	}
	if t.RevocationKey, err = revocation.Init(revDir, "pkie.test/revocation"); err != nil {
		return nil, err
	}
	if t.Revocation, err = revocation.Open(revDir, revocation.Options{Now: o.Now}); err != nil {
		return nil, err
	}
	if t.LogURL, err = t.serve(t.Log.Handler(ctlog.HandlerOptions{})); err != nil {
		return nil, err
	}
	if t.RevocationURL, err = t.serve(t.Revocation.Handler()); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(mirrorDir, 0o700); err != nil {
		return nil, err
	}
	if t.MirrorKey, err = ctmirror.GenerateKey(mirrorDir, "pkie.test/mirror"); err != nil {
		return nil, err
	}
	t.MirrorKeyFile = filepath.Join(mirrorDir, ctmirror.KeyFile)
	hc := &http.Client{Timeout: 10 * time.Second}
	// As pkie prover serve --ct-log runs it: over the log's HTTP read
	// path, every checkpoint verified with the pinned log key.
	if t.CTMirror, err = ctprover.OpenMirror(ctx, ctprover.MirrorConfig{LogURL: t.LogURL, LogKey: t.LogKey,
		MirrorKeyFile: t.MirrorKeyFile, Dir: filepath.Join(mirrorDir, "state"), HTTP: hc, Now: o.Now,
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		return nil, err
	}
	if t.RevProver, err = prover.New(prover.Config{PKIE: prover.Revocation, Verifier: t.Revocation.Verifier(), Now: o.Now, MaxAge: o.ProverMaxAge,
		Feed: &feed.Client{Base: t.RevocationURL + "/v1/sorted", HTTP: hc}}); err != nil {
		return nil, err
	}
	// Not a ServeMux, whose redirects of unclean paths would answer the
	// proof API's requests with HTML.
	proofs, tree := prover.Handler(prover.ServerOptions{CT: t.CTMirror, Revocation: t.RevProver}), http.StripPrefix("/ct", t.CTMirror.Handler())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/ct/") {
			tree.ServeHTTP(w, r)
			return
		}
		proofs.ServeHTTP(w, r)
	})
	if t.ProverURL, err = t.serve(h); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *TTPs) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := ctlog.NewHTTPServer(h)
	srv.ErrorLog = discardLog()
	t.servers = append(t.servers, srv)
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), nil
}

// CTProverConfig is the configuration of another ct prover (a cloud's)
// mirroring the testbed's log, signing with the testbed mirror's key so
// that CTVerifierConfig's pins accept its heads.
func (t *TTPs) CTProverConfig() ctprover.ProverConfig {
	return ctprover.ProverConfig{LogURL: t.LogURL, LogKey: t.LogKey, MirrorKeyFile: t.MirrorKeyFile}
}

// CTVerifierConfig is the client's ct verifier pinning the mirror's head
// key and the log's key.
func (t *TTPs) CTVerifierConfig() ct.VerifierConfig {
	return ct.VerifierConfig{Key: t.MirrorKey, LogKey: t.LogKey}
}

// Refresh has the authority republish and the mirror and the revocation
// prover sync over HTTP. (The log publishes a checkpoint covering every
// chain LogChain returned for.)
func (t *TTPs) Refresh(ctx context.Context) error {
	if _, err := t.Revocation.Publish(ctx); err != nil {
		return err
	}
	if _, err := t.CTMirror.Sync(ctx); err != nil {
		return err
	}
	_, err := t.RevProver.Sync(ctx)
	return err
}

// LogChain submits a chain (leaf first, the root may be left out) to the
// log as add-chain does, and returns once a checkpoint covers it.
func (t *TTPs) LogChain(ctx context.Context, chain [][]byte) (*ctlog.AddChainResponse, error) {
	return t.Log.AddChain(ctx, chain, false)
}

// LogChains submits chains concurrently (the log batches what arrives
// together) and returns once a checkpoint covers them all, or at the
// first refusal.
func (t *TTPs) LogChains(ctx context.Context, chains [][][]byte) error {
	return t.Log.AddChains(ctx, chains)
}

// Revoke has issuer revoke serials through a real signed CRL.
func (t *TTPs) Revoke(ctx context.Context, issuer *CA, serials ...*big.Int) error {
	tmpl := &x509.RevocationList{Number: big.NewInt(time.Now().UnixNano()), ThisUpdate: time.Now().Add(-time.Minute),
		NextUpdate: time.Now().Add(24 * time.Hour)}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: s, RevocationTime: time.Now().Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, issuer.Cert, issuer.Key)
	if err != nil {
		return fmt.Errorf("testbed: creating CRL: %w", err)
	}
	_, err = t.Revocation.AddCRL(ctx, der, issuer.Cert)
	return err
}

// Close stops the servers and closes the stores.
func (t *TTPs) Close() error {
	var errs []error
	for _, s := range t.servers {
		errs = append(errs, s.Close())
	}
	if t.CTMirror != nil {
		errs = append(errs, t.CTMirror.Close())
	}
	if t.Log != nil {
		errs = append(errs, t.Log.Close())
	}
	if t.Revocation != nil {
		errs = append(errs, t.Revocation.Close())
	}
	if t.tempDir != "" {
		errs = append(errs, os.RemoveAll(t.tempDir))
	}
	return errors.Join(errs...)
}
