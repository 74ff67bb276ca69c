package cloud

import (
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

const (
	idFast = pkie.PrivateUseMin + 1
	idSlow = pkie.PrivateUseMin + 2
)

var transports = []string{pecwire.QUIC, pecwire.TCP}

// TestRegisterPingProve registers over each transport, checks the
// keepalive exchange and proves one client-only submission end to end: the
// proof that arrives verifies under the prover's key for the chain and
// parameters submitted.
func TestRegisterPingProve(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s := newSigner(idFast)
			tc := startCloud(t, Config{Provers: []pkie.Prover{s}, Keepalive: 7 * time.Second, MaxFrame: 40000})
			c, id := tc.register(t, tr)
			if id == (pecwire.ClientID{}) {
				t.Fatal("zero client id")
			}
			if got := tc.Clients(); got != 1 {
				t.Fatalf("%d clients registered, want 1", got)
			}
			send(t, c, &pecwire.Ping{Seq: 42})
			if p := recvAs[*pecwire.Pong](t, c); p.Seq != 42 {
				t.Fatalf("pong %d, want 42", p.Seq)
			}
			chain := testChain(t, "example.com")
			nonce := pecwire.Nonce{1, 2, 3, 4, 5, 6, 7, 8}
			send(t, c, &pecwire.Submit{
				ClientID: id, Nonce: nonce, Budget: 5 * time.Second, ServerName: "Example.COM", Port: 443,
				Requests: []pkie.Request{{ID: idFast, Params: []byte("p")}}, Chain: chain,
			})
			p := recvAs[*pecwire.Proof](t, c)
			if p.ClientID != id || p.Nonce != nonce || p.ID != idFast || p.Status != pecwire.ProofOK {
				t.Fatalf("proof message %+v", p)
			}
			// The server name reaches provers lower-cased, as SNI compares.
			sub := &pkie.Subject{ServerName: "example.com", Port: 443, Chain: chain}
			if err := s.verify(sub, []byte("p"), p.Proof); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRegisteredAnnouncesBounds checks that Registered carries the
// keepalive interval and frame limit the cloud enforces.
func TestRegisteredAnnouncesBounds(t *testing.T) {
	tc := startCloud(t, Config{Keepalive: 7 * time.Second, MaxFrame: 40000})
	for _, tr := range transports {
		c := tc.dial(t, tr)
		send(t, c, &pecwire.Register{Version: pecwire.Version})
		r := recvAs[*pecwire.Registered](t, c)
		if r.Version != pecwire.Version || r.Keepalive != 7*time.Second || r.MaxFrame != 40000 {
			t.Errorf("%s: registered %+v", tr, r)
		}
	}
}
