package cloud_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecbench"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/testbed"
)

// BenchmarkSubmission measures the cloud per submission, end to end over
// one session: the Submit of a 4.5 KB chain (the PEC paper's flight size)
// decoded, its chain parsed, the ct and revocation provers run, both Proof
// frames pushed back. Sixteen submissions are kept in flight, so the
// figure is the cloud's cost per submission plus the session's share of
// the transport, not a round trip. `pkie bench pec` measures the same
// under many concurrent sessions beside an echo ceiling.
func BenchmarkSubmission(b *testing.B) {
	ctx := context.Background()
	root, err := testbed.NewRootCA("bench root", testbed.RSA2048)
	if err != nil {
		b.Fatal(err)
	}
	inter, err := root.NewIntermediate("bench intermediate", testbed.RSA2048)
	if err != nil {
		b.Fatal(err)
	}
	leaf, err := pecbench.PaddedLeaf(inter, "site.test", testbed.RSA2048, pecbench.PaperFlightBytes)
	if err != nil {
		b.Fatal(err)
	}
	ttps, err := testbed.StartTTPs(testbed.TTPOptions{Roots: []*testbed.CA{root}})
	if err != nil {
		b.Fatal(err)
	}
	defer ttps.Close()
	if _, err := ttps.LogChain(ctx, leaf.Chain); err != nil {
		b.Fatal(err)
	}
	if err := ttps.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	c, err := testbed.StartCloud(ctx, testbed.CloudOptions{TTPs: ttps})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	pin, _ := c.Bundle.Pin()
	for _, tr := range []string{pecwire.QUIC, pecwire.TCP} {
		b.Run(tr, func(b *testing.B) {
			var conn *pecwire.Conn
			if tr == pecwire.QUIC {
				conn, err = pecwire.DialQUIC(ctx, c.QUIC, pecwire.ClientTLS(pin), nil)
			} else {
				conn, err = pecwire.DialTCP(ctx, c.TCP, pecwire.ClientTLS(pin))
			}
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			if err := conn.Send(&pecwire.Register{Version: pecwire.Version}, time.Time{}); err != nil {
				b.Fatal(err)
			}
			m, err := conn.Recv(time.Now().Add(10 * time.Second))
			if err != nil {
				b.Fatal(err)
			}
			reg := m.(*pecwire.Registered)
			sub := &pecwire.Submit{ClientID: reg.ClientID, Budget: 5 * time.Second, ServerName: "site.test", Port: 443,
				Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Revocation}}, Chain: leaf.Chain}
			const window = 16
			var seq uint64
			send := func() {
				seq++
				s := *sub
				binary.BigEndian.PutUint64(s.Nonce[:], seq)
				if err := conn.Send(&s, time.Now().Add(10*time.Second)); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(pecbench.ChainBytes(leaf.Chain)))
			b.ResetTimer()
			inflight := 0
			for range min(window, b.N) {
				send()
				inflight++
			}
			sent := inflight
			for done := 0; done < b.N; {
				// Two outcomes per submission.
				for range 2 {
					m, err := conn.Recv(time.Now().Add(10 * time.Second))
					if err != nil {
						b.Fatal(err)
					}
					if p, ok := m.(*pecwire.Proof); !ok || p.Status != pecwire.ProofOK {
						b.Fatalf("outcome %T %+v", m, m)
					}
				}
				done++
				if sent < b.N {
					send()
					sent++
				}
			}
		})
	}
}
