package testbed

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WorldOptions shape a synthetic world.
type WorldOptions struct {
	// Listeners is how many TLS listeners share the live names (default 4).
	Listeners int
	// Dead reports the names that no longer serve TLS: Lookup leads them
	// to a loopback port that refuses connections, or with DeadSilent to
	// one that accepts and never answers. Nil means none.
	Dead func(host string) bool
	// DeadSilent makes dead names silent rather than refusing: a probe's
	// connection is accepted and its handshake goes unanswered until the
	// probe times out. That is what a notary meets at a server that has
	// gone (no answer to its SYN, as a trace's dead targets show): each
	// probe holds its slot for the whole probe timeout, where a refused
	// connection frees it at once.
	DeadSilent bool
	// MaxLeaves bounds the leaves kept in memory (default 1<<20). Leaves
	// are a pure function of the name (see World), so one dropped is made
	// again, identical, when next asked for.
	MaxLeaves int
}

// World is a synthetic Internet on loopback for any set of names, the
// targets of a replayed workload (Forced Perspectives, IMC 2014, §3): every
// live name is a TLS server presenting a leaf for that name, every dead name
// refuses connections. A few listeners serve all live names, each picking
// the leaf by SNI and making it on first use, so a hundred thousand names
// cost a few sockets and one signature each.
//
// All leaves share one Ed25519 key and are signed by one Ed25519 root with
// fixed validity and a serial derived from the name. Ed25519 signatures are
// deterministic, so a name's leaf (and so its fingerprint) is the same bytes
// whenever it is made: the cache can be bounded without a name ever seeming
// to change its certificate, which a notary would report as a conflict.
//
// A host that is an IP literal is served (and fingerprinted) as the name
// "": a probe of an IP literal sends no SNI, so the server cannot tell one
// from another.
type World struct {
	// CA is the root every leaf chains to.
	CA *CA
	// Addrs are the listeners' addresses.
	Addrs []netip.AddrPort
	// Refused is the loopback address dead names lead to: a closed port,
	// or with DeadSilent a listener that never speaks.
	Refused netip.AddrPort

	o         WorldOptions
	leafKey   ed25519.PrivateKey
	notBefore time.Time
	notAfter  time.Time

	mu     sync.Mutex
	leaves map[string]*worldLeaf

	lns        []net.Listener
	probeBytes atomic.Int64
	wg         sync.WaitGroup
	closed     chan struct{}
	conns      sync.Map // net.Conn → struct{}: closed on Close
}

type worldLeaf struct {
	cert   tls.Certificate
	sha1   [20]byte
	sha256 [32]byte
}

// StartWorld starts a world's listeners on 127.0.0.1.
func StartWorld(o WorldOptions) (w *World, err error) {
	if o.Listeners <= 0 {
		o.Listeners = 4
	}
	if o.MaxLeaves <= 0 {
		o.MaxLeaves = 1 << 20
	}
	ca, err := NewRootCA("pkie Synthetic World Root", Ed25519)
	if err != nil {
		return nil, err
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().Truncate(time.Hour)
	w = &World{
		CA: ca, o: o, leafKey: key,
		notBefore: now.Add(-time.Hour), notAfter: now.Add(90 * 24 * time.Hour),
		leaves: map[string]*worldLeaf{}, closed: make(chan struct{}),
	}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	// A port that was bound and released refuses connections until the
	// kernel hands it to someone else, which on loopback during a run is
	// unlikely; a connection that does succeed there fails its handshake,
	// which a notary reports the same way (503).
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testbed: world: %w", err)
	}
	w.Refused = rl.Addr().(*net.TCPAddr).AddrPort()
	if o.DeadSilent {
		w.lns = append(w.lns, rl)
		w.wg.Add(1)
		go w.serve(rl, nil)
	} else {
		rl.Close()
	}
	cfg := &tls.Config{
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			l, err := w.leaf(hi.ServerName)
			if err != nil {
				return nil, err
			}
			return &l.cert, nil
		},
	}
	for range o.Listeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testbed: world: %w", err)
		}
		w.lns = append(w.lns, ln)
		w.Addrs = append(w.Addrs, ln.Addr().(*net.TCPAddr).AddrPort())
		w.wg.Add(1)
		go w.serve(ln, cfg)
	}
	return w, nil
}

func (w *World) serve(ln net.Listener, cfg *tls.Config) {
	defer w.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			cc := CountConn(c, &w.probeBytes)
			w.conns.Store(c, struct{}{})
			defer w.conns.Delete(c)
			defer c.Close()
			select {
			case <-w.closed: // Close's sweep may have missed it
				return
			default:
			}
			// A probe hangs up after the handshake (or, at a silent
			// dead name, after its timeout); the deadline only frees
			// what a stuck client leaves behind.
			c.SetDeadline(time.Now().Add(30 * time.Second))
			if cfg == nil {
				io.Copy(io.Discard, cc)
				return
			}
			tc := tls.Server(cc, cfg)
			if tc.Handshake() != nil {
				return
			}
			io.Copy(io.Discard, tc)
		}()
	}
}

// leafName is the name a host is served under: itself, lower-cased, or ""
// for an IP literal (no SNI).
func leafName(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

func (w *World) leaf(name string) (*worldLeaf, error) {
	name = leafName(name)
	w.mu.Lock()
	l, ok := w.leaves[name]
	w.mu.Unlock()
	if ok {
		return l, nil
	}
	l, err := w.makeLeaf(name)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if have, ok := w.leaves[name]; ok {
		return have, nil
	}
	if len(w.leaves) >= w.o.MaxLeaves {
		// Dropping everything keeps the bound without an LRU's
		// bookkeeping; a dropped leaf comes back the same bytes.
		clear(w.leaves)
	}
	w.leaves[name] = l
	return l, nil
}

func (w *World) makeLeaf(name string) (*worldLeaf, error) {
	h := sha256.Sum256([]byte(name))
	serial := new(big.Int).SetUint64(binary.BigEndian.Uint64(h[:8]) >> 1)
	tmpl := &x509.Certificate{
		SerialNumber:   serial.Add(serial, big.NewInt(1)),
		Subject:        pkix.Name{CommonName: name},
		NotBefore:      w.notBefore,
		NotAfter:       w.notAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		AuthorityKeyId: w.CA.Cert.SubjectKeyId,
	}
	if name == "" {
		tmpl.Subject.CommonName = "pkie synthetic world (no SNI)"
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, w.CA.Cert, w.leafKey.Public(), w.CA.Key)
	if err != nil {
		return nil, fmt.Errorf("testbed: world: issuing %q: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testbed: world: %w", err)
	}
	return &worldLeaf{
		cert:   tls.Certificate{Certificate: [][]byte{der}, PrivateKey: crypto.Signer(w.leafKey), Leaf: cert},
		sha1:   sha1.Sum(der),
		sha256: sha256.Sum256(der),
	}, nil
}

// Lookup implements probe.Lookup: a live name leads to one of the listeners
// (the same one every time, by hash), a dead one to Refused. The port asked
// for is ignored, as Resolver ignores it.
func (w *World) Lookup(_ context.Context, host string, _ int) ([]netip.AddrPort, error) {
	select {
	case <-w.closed:
		return nil, errors.New("testbed: world is closed")
	default:
	}
	if w.o.Dead != nil && w.o.Dead(host) {
		return []netip.AddrPort{w.Refused}, nil
	}
	f := fnv.New32a()
	f.Write([]byte(leafName(host)))
	return []netip.AddrPort{w.Addrs[int(f.Sum32()%uint32(len(w.Addrs)))]}, nil
}

// Fingerprint returns the SHA-1 (Convergence's) and SHA-256 (the v1 API's)
// of the leaf host is served with, making it if need be. A dead host has
// one too: what it served before it died.
func (w *World) Fingerprint(host string) (sha1Sum [20]byte, sha256Sum [32]byte, err error) {
	l, err := w.leaf(host)
	if err != nil {
		return sha1Sum, sha256Sum, err
	}
	return l.sha1, l.sha256, nil
}

// Leaf returns the certificate host is served with.
func (w *World) Leaf(host string) (*x509.Certificate, error) {
	l, err := w.leaf(host)
	if err != nil {
		return nil, err
	}
	return l.cert.Leaf, nil
}

// ProbeBytes is the bytes the listeners have carried, both ways: TCP
// payload (TLS records), not IP and TCP headers.
func (w *World) ProbeBytes() int64 { return w.probeBytes.Load() }

// RootsPEM returns the world's root as a PEM trust store.
func (w *World) RootsPEM() []byte { return w.CA.PEM() }

// Close stops the listeners and ends their connections.
func (w *World) Close() error {
	select {
	case <-w.closed:
		return nil
	default:
	}
	close(w.closed)
	for _, ln := range w.lns {
		ln.Close()
	}
	w.conns.Range(func(k, _ any) bool {
		k.(net.Conn).Close()
		return true
	})
	w.wg.Wait()
	return nil
}
