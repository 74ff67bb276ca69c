package soak

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/httplimit"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// Source addresses: the good client and one per attack, so that bounds per
// client address can tell them apart.
const (
	goodSource       = "127.0.0.1"
	h2Source         = "127.0.0.2"
	slowAddSource    = "127.0.0.3"
	floodSource      = "127.0.0.4"
	idleSource       = "127.0.0.5"
	poisonSource     = "127.0.0.6"
	poisonServerAddr = "127.0.0.7" // the attacker's TLS server
	malformedSource  = "127.0.0.8"
)

// seedEntries is how many certificates the log holds before traffic
// starts, so that consistency proofs and entry pages have something to
// return.
const seedEntries = 64

// world is the services under test and the sites the notary probes.
type world struct {
	root, issuing *testbed.CA
	path          *testbed.Resolver

	site     *testbed.Site // the site good checks ask about
	siteSHA1 string        // its leaf's SHA-1, Convergence form
	siteSHA2 string        // its leaf's SHA-256, hex
	victim   *testbed.Site // the site whose name the poisoning attack targets
	silent   *testbed.Silent

	notary     *testbed.Notary
	notaryCert *x509.Certificate

	log    *ctlog.Log
	sorted *ctprover.Mirror // the log's sorted tree, under /pkie/sorted/
	logURL string
	logSrv *http.Server

	fresh atomic.Int64 // numbers fresh names for uncached checks

	dir    string
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed []func()
}

func startWorld(ctx context.Context) (w *world, err error) {
	w = &world{path: testbed.NewResolver()}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	if w.root, err = testbed.NewRootCA("pkie Soak Root", testbed.ECDSAP256); err != nil {
		return nil, err
	}
	if w.issuing, err = w.root.NewIntermediate("pkie Soak Issuing CA", testbed.ECDSAP256); err != nil {
		return nil, err
	}
	start := func(name string) (*testbed.Site, error) {
		leaf, err := w.issuing.Issue(testbed.LeafOptions{DNSNames: []string{name}})
		if err != nil {
			return nil, err
		}
		s, err := testbed.StartSite(name, leaf, nil)
		if err != nil {
			return nil, err
		}
		w.closed = append(w.closed, func() { s.Close() })
		w.path.Set(name, s.Addr)
		return s, nil
	}
	if w.site, err = start("site.test"); err != nil {
		return nil, err
	}
	s1 := sha1.Sum(w.site.Leaf().Cert.Raw)
	s2 := sha256.Sum256(w.site.Leaf().Cert.Raw)
	w.siteSHA1, w.siteSHA2 = probe.ColonHex(s1[:]), fmt.Sprintf("%x", s2)
	if w.victim, err = start("victim.test"); err != nil {
		return nil, err
	}
	if w.silent, err = testbed.StartSilent(); err != nil {
		return nil, err
	}
	w.closed = append(w.closed, func() { w.silent.Close() })
	w.path.Set("silent.test", w.silent.Addr)

	if w.notary, err = testbed.StartNotary(testbed.NotaryOptions{Name: "soak-notary", Path: w.path}); err != nil {
		return nil, err
	}
	w.closed = append(w.closed, func() { w.notary.Close() })
	w.notaryCert = w.notary.Identity.Cert

	if err := w.startLog(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// startLog starts the log as "pkie log serve" does: the static-ct-api log
// on Tessera's POSIX storage accepting chains to the soak's root only, its
// handler with the default bounds behind ctlog.NewHTTPServer, and the
// sorted tree of its certificates (a ct mirror over the log's Reader,
// signed with the log's head key) under /pkie/sorted/, synced every 10 s.
func (w *world) startLog(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "pkie-soak-")
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	w.dir = dir
	logDir := filepath.Join(dir, "log")
	roots := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.root.Cert.Raw})
	if _, err := ctlog.Init(ctx, logDir, "pkie.soak/log", ctlog.InitOptions{Roots: roots}); err != nil {
		return err
	}
	if w.log, err = ctlog.Open(ctx, logDir, ctlog.Options{}); err != nil {
		return err
	}
	// Submitted together, the seed chains share a few checkpoints.
	var wg sync.WaitGroup
	errs := make([]error, seedEntries)
	for i := range seedEntries {
		c, err := w.freshChain()
		if err != nil {
			return err
		}
		wg.Go(func() { _, errs[i] = w.log.AddChain(ctx, c, false) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("soak: seeding the log: %w", err)
		}
	}
	r := w.log.Reader()
	if w.sorted, err = ctprover.OpenMirror(ctx, ctprover.MirrorConfig{LogKey: w.log.VerifierKey(),
		Fetch:         &ctfollow.Fetchers{Checkpoint: r.ReadCheckpoint, Tile: r.ReadTile, EntryBundle: r.ReadEntryBundle, Issuer: r.ReadIssuer},
		MirrorKeyFile: filepath.Join(logDir, ctlog.HeadKeyFile), Dir: filepath.Join(dir, "sorted"), Interval: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		return err
	}
	if _, err := w.sorted.Sync(ctx); err != nil {
		return fmt.Errorf("soak: the log's sorted tree: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("soak: log listener: %w", err)
	}
	w.logURL = "http://" + ln.Addr().String()
	w.logSrv = ctlog.NewHTTPServer(w.log.Handler(ctlog.HandlerOptions{Extension: http.StripPrefix("/pkie/sorted", w.sorted.Handler())}))
	w.logSrv.ErrorLog = discardLog()
	// The connection caps `pkie log serve` puts in front of the log.
	go w.logSrv.Serve(httplimit.Listen(w.logSrv, ln, httplimit.Options{}))
	rctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.sorted.Run(rctx)
	}()
	return nil
}

// freshChain issues a new leaf and returns the chain a server would send.
func (w *world) freshChain() ([][]byte, error) {
	n := w.fresh.Add(1)
	leaf, err := w.issuing.Issue(testbed.LeafOptions{DNSNames: []string{fmt.Sprintf("c%d.soak.test", n)}})
	if err != nil {
		return nil, err
	}
	return leaf.Chain, nil
}

// freshName maps a name the notary has never seen to the good site, for
// uncached checks.
func (w *world) freshName() string {
	name := fmt.Sprintf("u%d.site.test", w.fresh.Add(1))
	w.path.Set(name, w.site.Addr)
	return name
}

func (w *world) notaryURL() string { return "https://" + w.notary.Addr.String() }

func (w *world) logAddr() string { return w.logURL[len("http://"):] }

func (w *world) close() {
	if w.logSrv != nil {
		w.logSrv.Close()
	}
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
	if w.sorted != nil {
		w.sorted.Close()
	}
	if w.log != nil {
		w.log.Close()
	}
	for i := len(w.closed) - 1; i >= 0; i-- {
		w.closed[i]()
	}
	if w.dir != "" {
		os.RemoveAll(w.dir)
	}
}

// dialer dials from the loopback address src.
func dialer(src string) *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
}

// pinnedTLS trusts exactly cert (the notary's, from its bundle), as pkie's
// notary clients do; nil trusts anything (attackers do not care).
func pinnedTLS(cert *x509.Certificate, protos ...string) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true,
		NextProtos:         protos,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if cert != nil && (len(raw) == 0 || string(raw[0]) != string(cert.Raw)) {
				return fmt.Errorf("soak: notary certificate is not the pinned one")
			}
			return nil
		},
	}
}

// httpClient is an HTTP/1.1 client from src. Without keepAlive every
// request opens a new connection, as a command-line client does; a flood of
// connections then reaches it as it would reach a newcomer.
func httpClient(src string, cert *x509.Certificate, keepAlive bool, conns int, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         dialer(src).DialContext,
			TLSClientConfig:     pinnedTLS(cert),
			DisableKeepAlives:   !keepAlive,
			MaxIdleConnsPerHost: conns,
			TLSHandshakeTimeout: 5 * time.Second,
		},
		// A redirect is an answer in its own right here.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
