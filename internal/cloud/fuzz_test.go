package cloud

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// FuzzSession feeds arbitrary bytes to the cloud's session loop over a real
// TLS session on loopback, then ends its input. Whatever the bytes, every
// frame the cloud answers with must decode and be a cloud-to-client
// message, the session must end, and the cloud must free it and go on
// serving.
func FuzzSession(f *testing.F) {
	frames := func(ms ...pecwire.Message) []byte {
		var b []byte
		for _, m := range ms {
			fr, err := pecwire.Marshal(m)
			if err != nil {
				f.Fatal(err)
			}
			b = append(b, fr...)
		}
		return b
	}
	chain := testChain(f, "example.com")
	sub := func(id pecwire.ClientID) *pecwire.Submit {
		return &pecwire.Submit{ClientID: id, Budget: 200 * time.Millisecond, ServerName: "example.com", Port: 443,
			Requests: []pkie.Request{{ID: idFast}, {ID: idSlow}, {ID: 7}}, Chain: chain}
	}
	f.Add(frames(&pecwire.Register{Version: 1}, &pecwire.Ping{Seq: 1}))
	f.Add(frames(&pecwire.Register{Version: 1}, sub(pecwire.ClientID{})))
	f.Add(frames(sub(pecwire.ClientID{1, 2, 3, 4}), &pecwire.Ping{Seq: 2}, &pecwire.Register{Version: 1}))
	f.Add(frames(&pecwire.Pong{Seq: 1}))
	f.Add([]byte{byte(pecwire.TypeSubmit), 0xff, 0xff, 0xff})
	f.Add([]byte{byte(pecwire.TypeRegister), 0, 0, 1})

	slow := newSigner(idSlow)
	slow.gate = make(chan struct{}) // always times out
	tc := startCloud(f, Config{Provers: []pkie.Prover{newSigner(idFast), slow}, MaxFrame: 16 << 10, MaxBudget: 200 * time.Millisecond})
	f.Fuzz(func(t *testing.T, in []byte) {
		nc, err := net.Dial("tcp", tc.tcpAddr)
		if err != nil {
			t.Fatal(err)
		}
		c := tls.Client(nc, pecwire.ClientTLS(tc.pin))
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		// The cloud may end the session before taking all of in.
		go func() {
			c.Write(in)
			c.CloseWrite()
		}()
		for {
			var h [4]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				break
			}
			body := make([]byte, int(h[1])<<16|int(h[2])<<8|int(h[3]))
			if _, err := io.ReadFull(c, body); err != nil {
				break
			}
			m, err := pecwire.Unmarshal(pecwire.Type(h[0]), body)
			if err != nil {
				t.Fatalf("the cloud sent an undecodable frame: %v", err)
			}
			switch m.(type) {
			case *pecwire.Registered, *pecwire.Pong, *pecwire.Proof, *pecwire.Reject, *pecwire.Error:
			default:
				t.Fatalf("the cloud sent a %T", m)
			}
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
			s, j := tc.Load()
			if s == 0 && j == 0 && tc.Clients() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session not freed: %d sessions, %d jobs, %d clients", s, j, tc.Clients())
			}
		}
	})
}
