package pecbench

import (
	"context"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/testbed"
)

func testChain(t testing.TB) [][]byte {
	t.Helper()
	root, err := testbed.NewRootCA("pecbench test root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("pecbench test intermediate", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := PaddedLeaf(inter, "site.test", testbed.ECDSAP256, PaperFlightBytes)
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Chain
}

func TestPaddedLeaf(t *testing.T) {
	chain := testChain(t)
	if n := ChainBytes(chain); n < PaperFlightBytes || n > PaperFlightBytes+200 {
		t.Fatalf("chain of %d bytes, want %d to %d", n, PaperFlightBytes, PaperFlightBytes+200)
	}
	if len(chain) != 2 {
		t.Fatalf("chain of %d certificates, want leaf and intermediate", len(chain))
	}
}

// TestLoadAgainstEcho drives the echo server on both transports and checks
// that every connection counted got exactly the template proofs back.
func TestLoadAgainstEcho(t *testing.T) {
	templates := map[pkie.ID]*pkie.Proof{
		pkie.CT:         {ID: pkie.CT, Version: 1, Body: make([]byte, 900)},
		pkie.Revocation: {ID: pkie.Revocation, Version: 1, Body: make([]byte, 700)},
	}
	e, err := StartEcho(templates, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	chain := testChain(t)
	for _, tr := range []struct{ transport, addr string }{{pecwire.QUIC, e.QUIC}, {pecwire.TCP, e.TCP}} {
		t.Run(tr.transport, func(t *testing.T) {
			l := Load{Sessions: 4, Window: 2, Duration: 300 * time.Millisecond, ServerName: "site.test", Port: 443, Chain: chain,
				Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Revocation}}}
			r, err := RunLoad(context.Background(), Target{Name: "echo", Addr: tr.addr, Transport: tr.transport, Pin: e.Pin}, l)
			if err != nil {
				t.Fatal(err)
			}
			if r.Proved == 0 || r.NotOK != 0 || r.SessionErrors != 0 {
				t.Fatalf("%+v", r)
			}
			// Two Proof frames: header 4, client id 4, nonce 8, id 2,
			// status 1, text length, proof envelope 6 + body.
			if r.ProofBytes < 900+700+2*(4+4+8+2+1+6) || r.ProofBytes > 900+700+200 {
				t.Errorf("proof bytes per connection %d", r.ProofBytes)
			}
			if r.SubmitBytes < PaperFlightBytes {
				t.Errorf("submit of %d bytes, smaller than the chain", r.SubmitBytes)
			}
			if r.PerSecond <= 0 || r.P50ms <= 0 || r.P99ms < r.P50ms {
				t.Errorf("rates %+v", r)
			}
		})
	}
	// A requested enhancement the server does not host is not proved.
	l := Load{Sessions: 1, Window: 1, Duration: 100 * time.Millisecond, Chain: chain, Requests: []pkie.Request{{ID: pkie.Notary}}}
	r, err := RunLoad(context.Background(), Target{Name: "echo", Addr: e.QUIC, Transport: pecwire.QUIC, Pin: e.Pin}, l)
	if err != nil {
		t.Fatal(err)
	}
	if r.Proved != 0 || r.NotOK == 0 {
		t.Errorf("unsupported enhancement counted as proved: %+v", r)
	}
	// A wrong pin refuses the server.
	var wrong [32]byte
	if _, err := RunLoad(context.Background(), Target{Name: "echo", Addr: e.QUIC, Transport: pecwire.QUIC, Pin: wrong}, l); err == nil {
		t.Error("load ran against a server whose key is not the pinned one")
	}
}
