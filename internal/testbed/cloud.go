package testbed

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/pkies/ct"
	pkienotary "github.com/pkie/pkie/internal/pkies/notary"
	"github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/provers"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	notaryprover "github.com/pkie/pkie/internal/provers/notary"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
)

// CloudOptions describe a PEC cloud to stand up on loopback with the
// built-in provers.
type CloudOptions struct {
	// Name is the bundle's name; "pec.test" if empty.
	Name string
	// TTPs, if set, are the log and the revocation authority the ct and
	// revocation provers mirror. The provers sync once as the cloud
	// starts (Refresh the TTPs first) and then every SyncInterval.
	TTPs *TTPs
	// CTLogList, if set, is the log list (a file or URL) whose logs the
	// ct prover fetches the inclusion evidence of SCTs from
	// (ctprover.ProverConfig.LogList): beside its mirror of TTPs' log,
	// or, without TTPs, as the ct prover's only half.
	CTLogList string
	// Notary hosts the notary enhancement: the cloud's own notary probes
	// each submitted server from the cloud's network path, which Resolve
	// gives (host → loopback host:port, as the notary prover's
	// configuration takes it).
	Notary  bool
	Resolve map[string]string
	// SyncInterval is how often the tree provers sync; zero means 30s.
	SyncInterval time.Duration
	// Config sets the cloud's bounds; its Certificate, Provers and
	// Registry are filled in.
	Config cloud.Config
	// DataDir holds the provers' state; empty means a temporary
	// directory removed on Close.
	DataDir string
}

// Cloud is a running PEC cloud on loopback: one point of presence serving
// QUIC and TLS over TCP, and its /metrics and /healthz.
type Cloud struct {
	*cloud.Cloud
	// QUIC and TCP are the listeners' addresses; HTTP the base URL of
	// /metrics and /healthz.
	QUIC, TCP, HTTP string
	// Bundle is what a client pins this cloud by.
	Bundle *pecwire.Bundle
	// Provers are the hosted provers.
	Provers []pkie.Prover

	cancel  context.CancelFunc
	pc      net.PacketConn
	wg      sync.WaitGroup
	http    *http.Server
	tempDir string
	closers []func() error
	once    sync.Once
}

// StartCloud starts a cloud as o says.
func StartCloud(ctx context.Context, o CloudOptions) (_ *Cloud, err error) {
	if o.Name == "" {
		o.Name = "pec.test"
	}
	// c, not the named result: an error return sets that to nil before
	// the deferred cleanup runs.
	c := &Cloud{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	dir := o.DataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pkie-cloud-"); err != nil {
			return nil, err
		}
		c.tempDir = dir
	}
	reg := provers.Registry()
	env := func(name string) (pkie.ProverEnv, error) {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return pkie.ProverEnv{}, err
		}
		return pkie.ProverEnv{DataDir: d, HTTP: &http.Client{Timeout: 10 * time.Second}}, nil
	}
	newProver := func(id pkie.ID, config json.RawMessage) (pkie.Prover, error) {
		k, _ := reg.Lookup(id)
		e, err := env(k.Name)
		if err != nil {
			return nil, err
		}
		p, err := k.NewProver(ctx, e, config)
		if err != nil {
			return nil, fmt.Errorf("testbed: cloud: %s prover: %w", k.Name, err)
		}
		if cl, ok := p.(interface{ Close() error }); ok {
			c.closers = append(c.closers, cl.Close)
		}
		c.Provers = append(c.Provers, p)
		return p, nil
	}
	interval := ctprover.Duration(o.SyncInterval)
	verifiers := map[string]json.RawMessage{}
	if o.TTPs != nil {
		ctc := o.TTPs.CTProverConfig()
		ctc.SyncInterval = interval
		ctc.LogList = o.CTLogList
		if _, err := newProver(pkie.CT, ctc.JSON()); err != nil {
			return nil, err
		}
		if _, err := newProver(pkie.Revocation, revprover.ProverConfig{AuthorityURL: o.TTPs.RevocationURL, AuthorityKey: o.TTPs.RevocationKey,
			SyncInterval: revprover.Duration(o.SyncInterval)}.JSON()); err != nil {
			return nil, err
		}
	} else if o.CTLogList != "" {
		if _, err := newProver(pkie.CT, ctprover.ProverConfig{LogList: o.CTLogList}.JSON()); err != nil {
			return nil, err
		}
	}
	if o.Notary {
		nc := notaryprover.ProverConfig{Name: o.Name + " notary", Resolve: o.Resolve, AllowPrivate: true}.JSON()
		// The testbed is its cloud's `pkie cloud init`: it makes the
		// notary's keys unless DataDir already holds them.
		if nd := filepath.Join(dir, pkienotary.Name); !fileExists(filepath.Join(nd, "v1.key")) {
			if _, err := notaryprover.Init(nd, nc); err != nil {
				return nil, err
			}
		}
		p, err := newProver(pkie.Notary, nc)
		if err != nil {
			return nil, err
		}
		verifiers["notary"] = pkienotary.VerifierConfig{Key: p.(*notaryprover.Prover).PublicKey()}.JSON()
	}

	cert, pin, err := cloudCertificate(o.Name)
	if err != nil {
		return nil, err
	}
	cfg := o.Config
	cfg.Certificate, cfg.Provers, cfg.Registry = cert, c.Provers, reg
	if c.Cloud, err = cloud.New(cfg); err != nil {
		return nil, err
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testbed: cloud: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("testbed: cloud: %w", err)
	}
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pc.Close()
		ln.Close()
		return nil, fmt.Errorf("testbed: cloud: %w", err)
	}
	c.QUIC, c.TCP, c.HTTP = pc.LocalAddr().String(), ln.Addr().String(), "http://"+hln.Addr().String()
	c.http = &http.Server{Handler: c.Cloud.Handler(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: discardLog()}
	sctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(4)
	go func() { defer c.wg.Done(); c.Cloud.Run(sctx) }()
	// The socket outlives ServeQUIC until every session has ended
	// (Stop), so the sessions' CONNECTION_CLOSE frames still go out.
	c.pc = pc
	go func() { defer c.wg.Done(); c.Cloud.ServeQUIC(sctx, pc) }()
	go func() { defer c.wg.Done(); c.Cloud.ServeTCP(sctx, ln) }()
	go func() { defer c.wg.Done(); c.http.Serve(hln) }()
	c.Bundle = &pecwire.Bundle{Version: pecwire.BundleVersion, Name: o.Name, Points: []pecwire.Point{{QUIC: c.QUIC, TCP: c.TCP}},
		SPKISHA256: hex.EncodeToString(pin[:])}
	if len(verifiers) > 0 {
		c.Bundle.Verifiers = verifiers
	}
	return c, nil
}

// Stop stops serving at once, as a cloud shut down by its operator does:
// its listeners close and its sessions end, each with a close the client
// sees (QUIC's CONNECTION_CLOSE, TCP's FIN). It waits for every session
// and submission to finish. (A cloud that vanishes without a word is a
// UDPProxy in front of it, blocked.)
func (c *Cloud) Stop() {
	c.once.Do(func() {
		if c.cancel != nil {
			c.cancel()
		}
		if c.http != nil {
			c.http.Close()
		}
		c.wg.Wait()
		if c.Cloud != nil {
			c.Cloud.Wait()
		}
		if c.pc != nil {
			c.pc.Close()
		}
	})
}

// Close stops the cloud and removes what it created.
func (c *Cloud) Close() error {
	c.Stop()
	var errs []error
	for _, f := range c.closers {
		errs = append(errs, f())
	}
	if c.tempDir != "" {
		errs = append(errs, os.RemoveAll(c.tempDir))
	}
	return errors.Join(errs...)
}

// cloudCertificate makes a cloud's throwaway key and self-signed
// certificate; clients pin the key's hash, as from `pkie cloud bundle`.
func cloudCertificate(name string) (tls.Certificate, [32]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, [32]byte{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, [32]byte{}, fmt.Errorf("testbed: cloud certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, [32]byte{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pecwire.SPKIHash(leaf), nil
}

// ClientVerifiers returns the verifiers a client pins the TTPs by: ct on
// the mirror's and the log's keys and revocation on the authority's, with their default
// freshness limits. Their keys come from the TTPs, never from a cloud.
func (t *TTPs) ClientVerifiers() ([]pkie.Verifier, error) {
	cv, err := ct.NewVerifier(t.CTVerifierConfig().JSON())
	if err != nil {
		return nil, fmt.Errorf("testbed: ct verifier: %w", err)
	}
	rv, err := revocation.NewVerifier(revocation.VerifierConfig{Key: t.RevocationKey}.JSON())
	if err != nil {
		return nil, fmt.Errorf("testbed: revocation verifier: %w", err)
	}
	return []pkie.Verifier{cv, rv}, nil
}

// NotaryVerifier returns the verifier for the cloud's notary, from its
// bundle; nil if the cloud hosts none.
func (c *Cloud) NotaryVerifier() (pkie.Verifier, error) {
	raw, ok := c.Bundle.Verifiers["notary"]
	if !ok {
		return nil, nil
	}
	return pkienotary.NewVerifier(raw)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
