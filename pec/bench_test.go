package pec

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
)

// BenchmarkFailover measures how long a client takes to register with the
// secondary cloud after the primary dies, as ClientStatus.LastFailover
// reports it: from the connection's failure (the primary stops) or from
// the first missed pong deadline (the path goes silent; pings every 50ms,
// 3 missed) to the new Registered. Against the real cloud on loopback.
//
//	go test -run '^$' -bench Failover -benchtime 20x ./pec/
func BenchmarkFailover(b *testing.B) {
	for _, mode := range []string{"stop", "silent"} {
		b.Run(mode, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				total += failoverOnce(b, mode)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/failover")
		})
	}
}

func failoverOnce(b *testing.B, mode string) time.Duration {
	certA, pinA := newRealCloudCert(b)
	certB, pinB := newRealCloudCert(b)
	ct := newSignerProver(pkie.CT)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cut := &cutConn{PacketConn: udp}
	a := startRealCloudOn(b, certA, cloud.Config{Provers: []pkie.Prover{ct}}, cut)
	sec := startRealCloud(b, certB, cloud.Config{Provers: []pkie.Prover{ct}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, ClientConfig{Clouds: []*Bundle{
		{Version: pecwire.BundleVersion, Name: "primary", Points: []Point{{QUIC: a.pt.QUIC}}, SPKISHA256: pinA},
		{Version: pecwire.BundleVersion, Name: "secondary", Points: []Point{{QUIC: sec.pt.QUIC}}, SPKISHA256: pinB},
	}, Keepalive: 50 * time.Millisecond, MissedPings: 3})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if mode == "stop" {
		a.stop()
	} else {
		cut.cut.Store(true)
	}
	for c.Status().Failovers == 0 {
		if ctx.Err() != nil {
			b.Fatal("no failover within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	return c.Status().LastFailover
}

// BenchmarkRegisterUDPBlocked measures registration in auto mode when the
// cloud's QUIC address drops every datagram: TCP starts after
// FallbackDelay (100ms here) and wins; ClientStatus.Registration.
func BenchmarkRegisterUDPBlocked(b *testing.B) {
	cert, pin := newRealCloudCert(b)
	rc := startRealCloud(b, cert, cloud.Config{})
	pt := rc.pt
	pt.QUIC = blackholeUDP(b)
	var total time.Duration
	for range b.N {
		c, err := Dial(context.Background(), ClientConfig{Clouds: []*Bundle{{Version: pecwire.BundleVersion, Name: "real", Points: []Point{pt}, SPKISHA256: pin}}, FallbackDelay: 100 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		st := c.Status()
		if st.Transport != TransportTCP {
			b.Fatalf("registered over %s", st.Transport)
		}
		total += st.Registration
		c.Close()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/registration")
}
