package pec

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/testbed"
)

// These tests put the testbed's UDP proxy between the client and a real
// cloud: datagrams lost at a chosen rate, or UDP blocked outright.

func proxied(t *testing.T, upstream string, cfg testbed.UDPProxyConfig) *testbed.UDPProxy {
	t.Helper()
	p, err := testbed.StartUDPProxy(upstream, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestRealCloudLossyQUIC: with 20% of datagrams lost each way, QUIC's loss
// recovery still delivers every proof, on the first session.
func TestRealCloudLossyQUIC(t *testing.T) {
	cert, pin := newRealCloudCert(t)
	ct, rev := newSignerProver(pkie.CT), newSignerProver(pkie.Revocation)
	rc := startRealCloud(t, cert, cloud.Config{Provers: []pkie.Prover{ct, rev}})
	px := proxied(t, rc.pt.QUIC, testbed.UDPProxyConfig{LossToServer: 0.2, LossToClient: 0.2, Seed: 9})
	c := dial(t, ClientConfig{Clouds: []*Bundle{{Version: pecwire.BundleVersion, Name: "lossy", Points: []Point{{QUIC: px.Addr.String()}}, SPKISHA256: pin}}})
	var subs []Submission
	var pends []*Pending
	for i := range 20 {
		sub := realSubmission(t, fmt.Sprintf("site%d.example", i), 20*time.Second, pkie.CT, pkie.Revocation)
		p, err := c.Submit(context.Background(), sub)
		if err != nil {
			t.Fatal(err)
		}
		subs, pends = append(subs, sub), append(pends, p)
	}
	for i, p := range pends {
		wantSigned(t, waitAll(t, p), subs[i], "lossy", ct, rev)
	}
	st := c.Status()
	if st.Transport != "quic" || st.Failovers != 0 {
		t.Fatalf("status %+v", st)
	}
	if s := px.Stats(); s.ToServer.Dropped == 0 || s.ToClient.Dropped == 0 {
		t.Fatalf("the proxy dropped nothing: %+v", s)
	}
}

// TestRealCloudUDPBlockedMidSession: UDP is blocked while the client is on
// QUIC; the pings go unanswered, and the client registers with the same
// cloud again over TCP (the race's fallback), where its pending
// submission is proved.
func TestRealCloudUDPBlockedMidSession(t *testing.T) {
	cert, pin := newRealCloudCert(t)
	slow := newSignerProver(pkie.CT)
	slow.gate = make(chan struct{})
	slow.started = make(chan struct{}, 1)
	rc := startRealCloud(t, cert, cloud.Config{Provers: []pkie.Prover{slow}})
	px := proxied(t, rc.pt.QUIC, testbed.UDPProxyConfig{})
	c := dial(t, ClientConfig{
		Clouds: []*Bundle{{Version: pecwire.BundleVersion, Name: "real", Points: []Point{{QUIC: px.Addr.String(), TCP: rc.pt.TCP}}, SPKISHA256: pin}},
		// A stall of the loaded machine as long as MissedPings keepalives
		// can end the TCP session too (the client then registers over TCP
		// again): at least one failover, ending on TCP. QUIC gets seconds
		// to win the first race: on two cores under a load of 16 a 50 ms
		// head start let TCP win it, and the test then began on TCP.
		Keepalive: 250 * time.Millisecond, FallbackDelay: 3 * time.Second,
	})
	if st := c.Status(); st.Transport != "quic" {
		t.Fatalf("status %+v", st)
	}
	sub := realSubmission(t, "site.example", 20*time.Second, pkie.CT)
	pend, err := c.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	<-slow.started
	px.Block(true)
	eventually(t, "registration over TCP", func() bool { st := c.Status(); return st.Connected && st.Transport == "tcp" })
	close(slow.gate) // the cloud proves the resubmission, the first copy's session being gone
	wantSigned(t, waitAll(t, pend), sub, "via tcp", slow)
	eventually(t, "a session over TCP", func() bool { st := c.Status(); return st.Connected && st.Transport == "tcp" })
	st := c.Status()
	if st.Failovers < 1 || st.Point != rc.pt.TCP || !strings.Contains(st.LastError, "pings unanswered") {
		t.Fatalf("status %+v", st)
	}
	if px.Stats().ToServer.Blocked == 0 {
		t.Fatal("the proxy blocked nothing")
	}
}

// TestRealCloudUDPBlockedFromStart: auto mode through a proxy that blocks
// UDP registers over TCP.
func TestRealCloudUDPBlockedFromStart(t *testing.T) {
	cert, pin := newRealCloudCert(t)
	ct := newSignerProver(pkie.CT)
	rc := startRealCloud(t, cert, cloud.Config{Provers: []pkie.Prover{ct}})
	px := proxied(t, rc.pt.QUIC, testbed.UDPProxyConfig{})
	px.Block(true)
	c := dial(t, ClientConfig{Clouds: []*Bundle{{Version: pecwire.BundleVersion, Name: "real", Points: []Point{{QUIC: px.Addr.String(), TCP: rc.pt.TCP}}, SPKISHA256: pin}}})
	st := c.Status()
	if st.Transport != "tcp" || st.Registration < DefaultFallbackDelay {
		t.Fatalf("status %+v, want TCP after the fallback delay", st)
	}
	sub := realSubmission(t, "site.example", 10*time.Second, pkie.CT)
	pend, err := c.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	wantSigned(t, waitAll(t, pend), sub, "via tcp", ct)
}
