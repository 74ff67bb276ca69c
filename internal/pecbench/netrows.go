package pecbench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/pec"
)

// Dist summarizes durations in milliseconds.
type Dist struct {
	N      int     `json:"n"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	MeanMS float64 `json:"mean_ms"`
}

func dist(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Dist{N: len(ds), P50ms: quantileMS(ds, 0.5), P99ms: quantileMS(ds, 0.99), MaxMS: float64(slices.Max(ds).Nanoseconds()) / 1e6,
		MeanMS: float64(sum.Nanoseconds()) / 1e6 / float64(len(ds))}
}

// FailoverRow is how long a client takes to move to its second cloud when
// the first dies (the PEC paper, §8.1), measured from the failure to the
// delivery, by the second cloud, of a submission made at the moment of the
// failure.
type FailoverRow struct {
	Trials      int     `json:"trials"`
	KeepaliveMS float64 `json:"keepalive_ms"`
	MissedPings int     `json:"missed_pings"`
	// Stopped: the primary cloud stops (its listeners and sessions
	// close), so the client learns of it from the closed session.
	Stopped Dist `json:"stopped"`
	// Silent: the primary's path drops every datagram, so only the
	// unanswered pings tell (MissedPings × the keepalive interval).
	Silent Dist `json:"silent"`
	// The client's own measure (ClientStatus.LastFailover): from the
	// failure's detection point to Registered with the secondary.
	StoppedClient Dist `json:"stopped_client"`
	SilentClient  Dist `json:"silent_client"`
}

// LossRow is proof delivery (Submit to the last proof) over QUIC through a
// path that drops a fraction of datagrams each way, beside the same path
// without loss.
type LossRow struct {
	Loss     float64 `json:"loss"`
	RTTms    float64 `json:"rtt_ms"`
	Clean    Dist    `json:"clean"`
	Lossy    Dist    `json:"lossy"`
	AddedP50 float64 `json:"added_p50_ms"`
	AddedP99 float64 `json:"added_p99_ms"`
	// Failed counts submissions under loss not proved within the budget.
	Failed int `json:"failed"`
	// Dropped are the datagrams the proxy dropped during the lossy run,
	// of Datagrams.
	Dropped   uint64 `json:"dropped"`
	Datagrams uint64 `json:"datagrams"`

	clean, lossy []time.Duration // for the plot
}

// BlockedRow is a client in auto mode whose UDP is blocked: time to
// register over TLS/TCP instead, and to get its first proofs.
type BlockedRow struct {
	Trials          int     `json:"trials"`
	FallbackDelayMS float64 `json:"fallback_delay_ms"`
	// Transports lists what each trial registered over (all "tcp").
	Transports []string `json:"transports"`
	Register   Dist     `json:"register"`
	Deliver    Dist     `json:"deliver"`
	// Open is the same with UDP open (QUIC wins), for comparison.
	OpenRegister Dist `json:"open_register"`
	OpenDeliver  Dist `json:"open_deliver"`
}

// prove submits the site's chain and waits for both proofs, returning how
// long that took; an outcome other than ok is an error.
func (w *world) prove(ctx context.Context, c *pec.Client, budget time.Duration) (time.Duration, error) {
	t0 := time.Now()
	p, err := c.Submit(ctx, pec.Submission{ServerName: siteName, Port: 443, Chain: w.leaf.Chain, Requests: commonCase(), Budget: budget})
	if err != nil {
		return 0, err
	}
	out := p.Wait(ctx)
	d := time.Since(t0)
	for _, id := range []pkie.ID{pkie.CT, pkie.Revocation} {
		o, ok := out[id]
		if !ok {
			return d, fmt.Errorf("pecbench: no %s outcome", id)
		}
		if o.Status != pec.ProofOK {
			return d, fmt.Errorf("pecbench: %s outcome %s: %s", id, o.Status, o.Text)
		}
	}
	return d, nil
}

// quicOnly is a bundle for c listing only addr as its QUIC address: a path
// through a proxy, and no TCP to fall back to on the same cloud.
func quicOnly(c *testbed.Cloud, name, addr string) *pec.Bundle {
	b := *c.Bundle
	b.Name = name
	b.Points = []pec.Point{{QUIC: addr}}
	return &b
}

func runFailover(ctx context.Context, cfg *Config, w *world) (*FailoverRow, error) {
	const keepalive = 100 * time.Millisecond
	const missed = 3
	row := &FailoverRow{Trials: cfg.Trials, KeepaliveMS: float64(keepalive) / 1e6, MissedPings: missed}
	second, err := w.startCloud(ctx, "secondary", benchCloudConfig(4))
	if err != nil {
		return nil, err
	}
	defer second.Close()
	secondB := *second.Bundle
	secondB.Name = "secondary"
	var stopped, silent, stoppedC, silentC []time.Duration
	for i := range cfg.Trials {
		for _, mode := range []string{"stopped", "silent"} {
			cfg.logf("failover: trial %d/%d, primary %s", i+1, cfg.Trials, mode)
			d, client, err := failoverOnce(ctx, w, mode, &secondB, keepalive, missed)
			if err != nil {
				return nil, fmt.Errorf("pecbench: failover (%s): %w", mode, err)
			}
			if mode == "stopped" {
				stopped, stoppedC = append(stopped, d), append(stoppedC, client)
			} else {
				silent, silentC = append(silent, d), append(silentC, client)
			}
		}
	}
	row.Stopped, row.Silent, row.StoppedClient, row.SilentClient = dist(stopped), dist(silent), dist(stoppedC), dist(silentC)
	return row, nil
}

func failoverOnce(ctx context.Context, w *world, mode string, second *pec.Bundle, keepalive time.Duration, missed int) (time.Duration, time.Duration, error) {
	first, err := w.startCloud(ctx, "primary", benchCloudConfig(4))
	if err != nil {
		return 0, 0, err
	}
	defer first.Close()
	primary := *first.Bundle
	primary.Name = "primary"
	var proxy *testbed.UDPProxy
	if mode == "silent" {
		if proxy, err = testbed.StartUDPProxy(first.QUIC, testbed.UDPProxyConfig{}); err != nil {
			return 0, 0, err
		}
		defer proxy.Close()
		primary = *quicOnly(first, "primary", proxy.Addr.String())
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := pec.Dial(dctx, pec.ClientConfig{Clouds: []*pec.Bundle{&primary, second}, Transport: pec.TransportQUIC,
		Keepalive: keepalive, MissedPings: missed})
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	if st := c.Status(); st.Cloud != "primary" {
		return 0, 0, fmt.Errorf("registered with %q, not the primary", st.Cloud)
	}
	t0 := time.Now()
	if mode == "silent" {
		proxy.Block(true)
	} else {
		first.Stop()
	}
	if _, err := w.prove(dctx, c, 20*time.Second); err != nil {
		return 0, 0, err
	}
	d := time.Since(t0)
	st := c.Status()
	if st.Cloud != "secondary" || st.Failovers != 1 {
		return 0, 0, fmt.Errorf("after the primary %s: cloud %q, %d failovers", mode, st.Cloud, st.Failovers)
	}
	return d, st.LastFailover, nil
}

func runLoss(ctx context.Context, cfg *Config, w *world) (*LossRow, error) {
	const rtt = 10 * time.Millisecond
	samples := max(cfg.LossSamples, 1)
	row := &LossRow{Loss: cfg.Loss, RTTms: float64(rtt) / 1e6}
	c, err := w.startCloud(ctx, "pec.bench", benchCloudConfig(4))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	proxy, err := testbed.StartUDPProxy(c.QUIC, testbed.UDPProxyConfig{Delay: rtt / 2, Seed: 1})
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	client, err := pec.Dial(dctx, pec.ClientConfig{Clouds: []*pec.Bundle{quicOnly(c, "pec.bench", proxy.Addr.String())}, Transport: pec.TransportQUIC})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	var clean, lossy []time.Duration
	cfg.logf("loss: %d submissions over a %v path without loss", samples, rtt)
	for range samples {
		d, err := w.prove(dctx, client, 10*time.Second)
		if err != nil {
			return nil, err
		}
		clean = append(clean, d)
	}
	cfg.logf("loss: %d submissions with %.0f%% of datagrams dropped each way", samples, 100*cfg.Loss)
	before := proxy.Stats()
	proxy.SetLoss(cfg.Loss, cfg.Loss)
	for range samples {
		d, err := w.prove(dctx, client, 10*time.Second)
		if err != nil {
			row.Failed++
			continue
		}
		lossy = append(lossy, d)
	}
	proxy.SetLoss(0, 0)
	after := proxy.Stats()
	row.Datagrams = after.ToServer.Received + after.ToClient.Received - before.ToServer.Received - before.ToClient.Received
	row.Dropped = after.ToServer.Dropped + after.ToClient.Dropped - before.ToServer.Dropped - before.ToClient.Dropped
	row.Clean, row.Lossy = dist(clean), dist(lossy)
	row.clean, row.lossy = clean, lossy
	row.AddedP50, row.AddedP99 = row.Lossy.P50ms-row.Clean.P50ms, row.Lossy.P99ms-row.Clean.P99ms
	return row, nil
}

func runBlocked(ctx context.Context, cfg *Config, w *world) (*BlockedRow, error) {
	row := &BlockedRow{Trials: cfg.Trials, FallbackDelayMS: float64(pec.DefaultFallbackDelay) / 1e6}
	c, err := w.startCloud(ctx, "pec.bench", benchCloudConfig(4))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	proxy, err := testbed.StartUDPProxy(c.QUIC, testbed.UDPProxyConfig{})
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	b := *c.Bundle
	b.Points = []pec.Point{{QUIC: proxy.Addr.String(), TCP: c.TCP}}
	var reg, del, oreg, odel []time.Duration
	for i := range cfg.Trials {
		for _, blocked := range []bool{true, false} {
			cfg.logf("blocked: trial %d/%d, UDP blocked %v", i+1, cfg.Trials, blocked)
			proxy.Block(blocked)
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			t0 := time.Now()
			client, err := pec.Dial(dctx, pec.ClientConfig{Clouds: []*pec.Bundle{&b}})
			if err != nil {
				cancel()
				return nil, err
			}
			st := client.Status()
			_, err = w.prove(dctx, client, 10*time.Second)
			d := time.Since(t0)
			client.Close()
			cancel()
			if err != nil {
				return nil, err
			}
			if blocked {
				row.Transports = append(row.Transports, st.Transport)
				reg, del = append(reg, st.Registration), append(del, d)
			} else {
				if st.Transport != pec.TransportQUIC {
					return nil, fmt.Errorf("pecbench: with UDP open the client registered over %s", st.Transport)
				}
				oreg, odel = append(oreg, st.Registration), append(odel, d)
			}
		}
	}
	row.Register, row.Deliver, row.OpenRegister, row.OpenDeliver = dist(reg), dist(del), dist(oreg), dist(odel)
	return row, nil
}
