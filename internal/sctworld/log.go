package sctworld

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/ctlog"
)

// Backend is a running static-ct-api log a Log fronts: where it takes
// submissions and serves its tiles, the key that signs its SCTs and
// checkpoints, and how to stop it.
type Backend struct {
	SubmissionURL string // serves /ct/v1/add-chain and add-pre-chain
	MonitoringURL string // serves /checkpoint, /tile/..., /issuer/...
	Key           crypto.PublicKey
	Close         func() error // nil when there is nothing to stop
}

// StartFunc starts a log whose checkpoints carry origin and that accepts
// chains to root. The world calls it once the log's front listens, since
// static-ct-api names a log's checkpoints after its submission URL.
type StartFunc func(ctx context.Context, origin string, root *x509.Certificate) (*Backend, error)

// Log is a CT log of the world behind a loopback front: one URL that is
// both its submission and its monitoring prefix (as pkie's own log serves
// them), so that the log's checkpoint origin is that URL without its
// scheme, as static-ct-api asks, and so that Stop can take the log off
// the network in the middle of a test whatever runs behind it.
type Log struct {
	Description string
	Operator    string
	// URL is the submission and monitoring prefix, without a trailing
	// slash; Origin is URL without its scheme.
	URL, Origin string
	Key         crypto.PublicKey
	SPKI        []byte
	ID          [32]byte // SHA-256 of SPKI (RFC 6962 §3.2)
	// Listed says whether the world's log list names the log.
	Listed bool
	// MMD is the maximum merge delay the list gives it.
	MMD time.Duration

	backend *Backend
	ln      net.Listener
	srv     *http.Server
	mu      sync.Mutex
	stopped bool
	hc      *http.Client
}

// StartLog starts a log behind a new front: it listens, starts the
// backend with the front's origin, accepting chains to root, and routes
// the front to it. The log is not listed until Listed is set. With port80
// the front listens on port 80 of a random 127/8 address, so that the
// origin has no port (listenFront), else on a free port of 127.0.0.1.
func StartLog(ctx context.Context, desc, operator string, start StartFunc, root *x509.Certificate, port80 bool) (_ *Log, err error) {
	var ln net.Listener
	if port80 {
		ln, err = listenFront()
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, fmt.Errorf("sctworld: log %s: %w", desc, err)
	}
	host := ln.Addr().String()
	if ap := ln.Addr().(*net.TCPAddr); ap.Port == 80 {
		host = ap.IP.String()
	}
	l := &Log{Description: desc, Operator: operator, ln: ln, URL: "http://" + host, MMD: 24 * time.Hour,
		hc: &http.Client{Timeout: 30 * time.Second}}
	l.Origin = strings.TrimPrefix(l.URL, "http://")
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if l.backend, err = start(ctx, l.Origin, root); err != nil {
		return nil, fmt.Errorf("sctworld: starting log %s: %w", desc, err)
	}
	l.Key = l.backend.Key
	if l.SPKI, err = x509.MarshalPKIXPublicKey(l.Key); err != nil {
		return nil, fmt.Errorf("sctworld: log %s: %w", desc, err)
	}
	l.ID = sha256.Sum256(l.SPKI)
	sub, err := url.Parse(l.backend.SubmissionURL)
	if err != nil {
		return nil, err
	}
	mon, err := url.Parse(l.backend.MonitoringURL)
	if err != nil {
		return nil, err
	}
	subP, monP := httputil.NewSingleHostReverseProxy(sub), httputil.NewSingleHostReverseProxy(mon)
	quiet := func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) }
	subP.ErrorHandler, monP.ErrorHandler = quiet, quiet
	l.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/ct/v1/") {
			subP.ServeHTTP(w, r)
			return
		}
		monP.ServeHTTP(w, r)
	})}
	go l.srv.Serve(ln)
	return l, nil
}

// listenFront listens where a log's URL needs no port: port 80 of a
// random address in 127.0.0.0/8, so that the origin, the URL without its
// scheme, is a bare address. TesseraCT v0.1.1 refuses an origin with a
// port (it must parse as a URL without a scheme). Where port 80 cannot be
// bound (no privilege, or no 127/8 beyond 127.0.0.1, as on macOS) it
// falls back to a free port of 127.0.0.1, which pkie's log accepts in its
// origin and TesseraCT does not.
func listenFront() (net.Listener, error) {
	var b [3]byte
	for range 4 {
		if _, err := rand.Read(b[:]); err != nil {
			break
		}
		if b == [3]byte{0, 0, 1} || b[2] == 0 || b[2] == 255 {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(net.IPv4(127, b[0], b[1], b[2]).String(), "80"))
		if err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// PKIELog starts pkie's own static-ct-api log (internal/ctlog on POSIX
// storage) in dir, in process, on a loopback port of its own.
func PKIELog(dir string) StartFunc {
	return func(ctx context.Context, origin string, root *x509.Certificate) (*Backend, error) {
		roots := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})
		if _, err := ctlog.Init(ctx, dir, origin, ctlog.InitOptions{Roots: roots}); err != nil {
			return nil, err
		}
		lg, err := ctlog.Open(ctx, dir, ctlog.Options{BatchMaxAge: 10 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lg.Close()
			return nil, err
		}
		srv := ctlog.NewHTTPServer(lg.Handler(ctlog.HandlerOptions{}))
		go srv.Serve(ln)
		u := "http://" + ln.Addr().String()
		return &Backend{SubmissionURL: u, MonitoringURL: u, Key: lg.PublicKey(), Close: func() error {
			return errors.Join(srv.Close(), lg.Close())
		}}, nil
	}
}

// Stop takes the log off the network: its front closes and every later
// request is refused, as when a log is down. The log behind it keeps its
// state.
func (l *Log) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.stopped = true
	if l.srv != nil {
		l.srv.Close()
	} else if l.ln != nil {
		l.ln.Close()
	}
}

// Close stops the log and what runs behind it.
func (l *Log) Close() error {
	l.Stop()
	if l.backend != nil && l.backend.Close != nil {
		return l.backend.Close()
	}
	return nil
}

// addChainRequest and addChainResponse are RFC 6962 §4.1's JSON.
type addChainRequest struct {
	Chain [][]byte `json:"chain"`
}

type addChainResponse struct {
	Version    uint8  `json:"sct_version"`
	ID         []byte `json:"id"`
	Timestamp  uint64 `json:"timestamp"`
	Extensions string `json:"extensions"`
	Signature  []byte `json:"signature"`
}

// Submit sends chain (leaf or precertificate first, then its issuers) to
// the log's add-pre-chain (precert) or add-chain and returns the SCT it
// answers with, serialized as RFC 6962 §3.2 says (the bytes a certificate,
// a TLS extension or an OCSP response carries in its SCT list).
func (l *Log) Submit(ctx context.Context, chain [][]byte, precert bool) ([]byte, error) {
	path := "/ct/v1/add-chain"
	if precert {
		path = "/ct/v1/add-pre-chain"
	}
	body, err := json.Marshal(addChainRequest{Chain: chain})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sctworld: %s %s: %w", l.Description, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("sctworld: %s %s: %s: %s", l.Description, path, resp.Status, bytes.TrimSpace(b))
	}
	var r addChainResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("sctworld: %s %s: %w", l.Description, path, err)
	}
	ext, err := base64.StdEncoding.DecodeString(r.Extensions)
	if err != nil {
		return nil, fmt.Errorf("sctworld: %s: SCT extensions: %w", l.Description, err)
	}
	if len(r.ID) != 32 || [32]byte(r.ID) != l.ID {
		return nil, fmt.Errorf("sctworld: %s answered with the SCT of log ID %x, not its own %x", l.Description, r.ID, l.ID)
	}
	// SignedCertificateTimestamp: version, log id, timestamp,
	// extensions<0..2^16-1>, and the DigitallySigned the log returned
	// already encoded.
	out := []byte{r.Version}
	out = append(out, r.ID...)
	out = binary.BigEndian.AppendUint64(out, r.Timestamp)
	out = binary.BigEndian.AppendUint16(out, uint16(len(ext)))
	out = append(out, ext...)
	out = append(out, r.Signature...)
	return out, nil
}

// dirFor is a log's directory under the world's.
func dirFor(base, name string) string { return filepath.Join(base, "logs", name) }
