package pecbench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/pec"
)

// LatencyRow is the client-only latency inflation over loopback: the site
// behind a TCP delay proxy at each client–server round trip, the cloud
// behind a UDP delay proxy at each client–cloud round trip, and the time
// to a connection the application may use, with PEC (the dialer: TLS
// handshake, chain to the cloud as soon as it arrives, proofs verified)
// and without (the TLS handshake alone, same site, same path). The PEC
// paper's Figure 5 plots the relative inflation of such times.
type LatencyRow struct {
	Handshakes int            `json:"handshakes"`
	Points     []LatencyPoint `json:"points"`
}

// LatencyPoint is one placement.
type LatencyPoint struct {
	ServerRTTms float64 `json:"server_rtt_ms"`
	CloudRTTms  float64 `json:"cloud_rtt_ms"`
	Without     Dist    `json:"without_pec"`
	With        Dist    `json:"with_pec"`
	// Inflation is (With - Without) / Without at the median.
	Inflation float64 `json:"inflation_p50"`
	// Expected is what the placement alone predicts for client-only
	// PEC over TLS 1.3: the chain leaves for the cloud when the server's
	// flight arrives, one server round trip in, and the proofs come back
	// a cloud round trip later, so the connection is ready a cloud round
	// trip after the handshake: cloud RTT / server RTT.
	Expected float64 `json:"inflation_expected"`
}

func runLatency(ctx context.Context, cfg *Config, w *world) (*LatencyRow, error) {
	site, err := testbed.StartSite(siteName, w.leaf, nil)
	if err != nil {
		return nil, err
	}
	defer site.Close()
	c, err := w.startCloud(ctx, "pec.bench", benchCloudConfig(4))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	row := &LatencyRow{Handshakes: cfg.Handshakes}
	for _, crtt := range cfg.CloudRTTs {
		cp, err := testbed.StartUDPProxy(c.QUIC, testbed.UDPProxyConfig{Delay: crtt / 2})
		if err != nil {
			return nil, err
		}
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		client, err := pec.Dial(dctx, pec.ClientConfig{Clouds: []*pec.Bundle{quicOnly(c, "pec.bench", cp.Addr.String())}, Transport: pec.TransportQUIC})
		cancel()
		if err != nil {
			cp.Close()
			return nil, err
		}
		for _, srtt := range cfg.ServerRTTs {
			cfg.logf("latency: server RTT %v, cloud RTT %v, %d handshakes each way", srtt, crtt, cfg.Handshakes)
			pt, err := latencyPoint(ctx, w, site, client, srtt, cfg.Handshakes)
			if err != nil {
				client.Close()
				cp.Close()
				return nil, err
			}
			pt.CloudRTTms = float64(crtt) / 1e6
			pt.Expected = float64(crtt) / float64(srtt)
			row.Points = append(row.Points, *pt)
		}
		client.Close()
		cp.Close()
	}
	return row, nil
}

func latencyPoint(ctx context.Context, w *world, site *testbed.Site, client *pec.Client, srtt time.Duration, n int) (*LatencyPoint, error) {
	sp, err := testbed.StartDelayProxy(site.Addr.String(), srtt)
	if err != nil {
		return nil, err
	}
	defer sp.Close()
	addr := sp.Addr.String()
	// No resumption: every handshake is a full one, proved afresh.
	base := &tls.Config{RootCAs: w.root.Pool(), ServerName: siteName, SessionTicketsDisabled: true}
	d := &pec.Dialer{Mode: pec.ModeClientOnly, Cloud: client, Verifiers: w.verifiers, TLSConfig: base.Clone(), Resumption: pec.ResumeFresh,
		NetDial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, network, addr)
		}}
	var without, with []time.Duration
	for range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t0 := time.Now()
		td := tls.Dialer{Config: base.Clone()}
		conn, err := td.DialContext(hctx, "tcp", addr)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("pecbench: TLS handshake without PEC: %w", err)
		}
		without = append(without, time.Since(t0))
		conn.Close()

		t0 = time.Now()
		pc, err := d.Dial(hctx, "tcp", net.JoinHostPort(siteName, "443"))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("pecbench: PEC dial: %w", err)
		}
		with = append(with, time.Since(t0))
		pc.Close()
	}
	pt := &LatencyPoint{ServerRTTms: float64(srtt) / 1e6, Without: dist(without), With: dist(with)}
	if pt.Without.P50ms > 0 {
		pt.Inflation = (pt.With.P50ms - pt.Without.P50ms) / pt.Without.P50ms
	}
	return pt, nil
}
