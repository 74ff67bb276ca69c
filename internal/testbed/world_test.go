package testbed

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/pkie/pkie/probe"
)

func TestWorld(t *testing.T) {
	dead := map[string]bool{"gone.example": true}
	w, err := StartWorld(WorldOptions{Listeners: 3, Dead: func(h string) bool { return dead[h] }, MaxLeaves: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(w.RootsPEM())

	for _, host := range []string{"www.example.com", "a.example.org", "b.example.net", "www.example.com"} {
		addrs, err := w.Lookup(ctx, host, 443)
		if err != nil || len(addrs) != 1 {
			t.Fatalf("Lookup(%s) = %v, %v", host, addrs, err)
		}
		// A verifying client: the leaf must be for the name and chain to
		// the world's root.
		c, err := tls.Dial("tcp", addrs[0].String(), &tls.Config{ServerName: host, RootCAs: pool})
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		der := c.ConnectionState().PeerCertificates[0].Raw
		c.Close()
		s1, s256, err := w.Fingerprint(host)
		if err != nil {
			t.Fatal(err)
		}
		if s1 != sha1.Sum(der) || s256 != sha256.Sum256(der) {
			t.Errorf("%s: Fingerprint does not match the leaf a client sees", host)
		}
	}
	// Three names through a cache of two: the evicted leaf came back the
	// same (checked above for www.example.com, asked first and last).
	// The prober sees the same fingerprint.
	p := probe.New(probe.Options{AllowPrivate: true, Lookup: w.Lookup})
	obs, err := p.Probe(ctx, probe.Target{Host: "a.example.org", Port: 443})
	if err != nil {
		t.Fatal(err)
	}
	if s1, _, _ := w.Fingerprint("A.Example.Org"); obs.SHA1 != s1 {
		t.Error("probe saw another leaf than Fingerprint names")
	}
	if w.ProbeBytes() < 500 {
		t.Errorf("ProbeBytes = %d after five handshakes", w.ProbeBytes())
	}

	addrs, err := w.Lookup(ctx, "gone.example", 443)
	if err != nil {
		t.Fatal(err)
	}
	if addrs[0] != w.Refused {
		t.Fatalf("dead name leads to %v, not %v", addrs[0], w.Refused)
	}
	_, err = net.DialTimeout("tcp", addrs[0].String(), 5*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialling a dead name: %v, want connection refused", err)
	}
	if _, err := p.Probe(ctx, probe.Target{Host: "gone.example", Port: 443}); !errors.Is(err, probe.ErrConnect) {
		t.Errorf("probing a dead name: %v, want %v", err, probe.ErrConnect)
	}
}
