package testbed

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/internal/feed"
	ctlog "github.com/pkie/pkie/internal/oldctlog"
	"github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/revocation"
)

// TTPOptions place the proof-based PKIEs' trusted third parties in the
// testbed.
type TTPOptions struct {
	// Dir holds the log's and the authority's directories; empty means a
	// temporary directory removed on Close.
	Dir string
	// Now is every party's clock (log, authority, provers); nil means
	// time.Now. Tests move it to make roots stale.
	Now func() time.Time
	// ProverMaxAge is how old a TTP checkpoint the provers accept at sync;
	// zero means 24h.
	ProverMaxAge time.Duration
}

// TTPs is a CT log, a revocation authority and a prover server for both,
// each on its own loopback HTTP listener.
type TTPs struct {
	Log           *ctlog.Log
	LogURL        string
	LogKey        string // the log's note verifier key, to pin
	Revocation    *revocation.Authority
	RevocationURL string
	RevocationKey string
	CTProver      *prover.Prover
	RevProver     *prover.Prover
	ProverURL     string

	servers []*http.Server
	tempDir string
}

// StartTTPs starts the log, the authority and the prover server. The
// provers are not synced: call Refresh after adding certificates or
// revocations.
func StartTTPs(o TTPOptions) (_ *TTPs, err error) {
	t := &TTPs{} // not the named result, which an error return sets to nil before the cleanup runs
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pkie-ttp-"); err != nil {
			return nil, err
		}
		t.tempDir = dir
	}
	logDir, revDir := filepath.Join(dir, "log"), filepath.Join(dir, "revocation")
	if t.LogKey, err = ctlog.Init(logDir, "pkie.test/log"); err != nil {
		return nil, err
	}
	if t.Log, err = ctlog.Open(logDir, ctlog.Options{Now: o.Now}); err != nil {
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
	hc := &http.Client{Timeout: 10 * time.Second}
	// As pkie prover serve runs it: a new head's log checkpoint must be
	// consistent with the one bound to the head before.
	if t.CTProver, err = prover.New(prover.Config{PKIE: prover.CT, Verifier: t.Log.Verifier(), Now: o.Now, MaxAge: o.ProverMaxAge,
		Feed: &feed.Client{Base: t.LogURL + "/v1/sorted", HTTP: hc}, LogConsistency: prover.LogConsistency(t.LogURL, hc)}); err != nil {
		return nil, err
	}
	if t.RevProver, err = prover.New(prover.Config{PKIE: prover.Revocation, Verifier: t.Revocation.Verifier(), Now: o.Now, MaxAge: o.ProverMaxAge,
		Feed: &feed.Client{Base: t.RevocationURL + "/v1/sorted", HTTP: hc}}); err != nil {
		return nil, err
	}
	h := prover.Handler(prover.ServerOptions{CT: t.CTProver, Revocation: t.RevProver})
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

// Refresh has the log build and sign its sorted tree, the authority
// republish, and both provers sync over HTTP.
func (t *TTPs) Refresh(ctx context.Context) error {
	if _, err := t.Log.BuildSorted(ctx); err != nil {
		return err
	}
	if _, err := t.Revocation.Publish(ctx); err != nil {
		return err
	}
	if _, err := t.CTProver.Sync(ctx); err != nil {
		return err
	}
	_, err := t.RevProver.Sync(ctx)
	return err
}

// LogChain submits a chain to the log.
func (t *TTPs) LogChain(ctx context.Context, chain [][]byte) (*ctlog.AddResult, error) {
	return t.Log.AddChain(ctx, chain)
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
