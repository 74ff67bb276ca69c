package testbed

import (
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// TestCountingListener: the listener counts each connection it accepts and
// the TCP payload both ways, which is what the client's CountConn counts
// at its end: the same bytes, TLS handshakes included.
func TestCountingListener(t *testing.T) {
	w, err := StartWorld(WorldOptions{Listeners: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	leaf, err := w.leaf("count.test")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := NewCountingListener(tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{leaf.cert}}))
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Echo until the client hangs up.
			io.Copy(c, c)
			c.Close()
		}
	}()
	// CountingListener wraps the TLS listener here, so it counts
	// plaintext; wrapping a raw listener (as the notary's) counts TLS
	// records. Either way both ends must agree.
	var client atomic.Int64
	const conns, size = 3, 10000
	for range conns {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: "count.test"})
		cc := CountConn(tc, &client)
		if _, err := cc.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(cc, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		cc.Close()
	}
	ln.Close()
	<-done
	if ln.Accepts() != conns {
		t.Errorf("%d accepts, want %d", ln.Accepts(), conns)
	}
	if got, want := ln.Bytes(), int64(conns*2*size); got != want || client.Load() != want {
		t.Errorf("listener counted %d bytes, client %d; want %d", got, client.Load(), want)
	}
}
