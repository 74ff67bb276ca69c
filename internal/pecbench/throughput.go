package pecbench

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/testbed"
)

// ThroughputRow is connections proved per second through the cloud beside
// the echo ceiling, measured the same way in the same run.
type ThroughputRow struct {
	ChainBytes int `json:"chain_bytes"`
	ChainCerts int `json:"chain_certs"`
	// TreeSizes are the log's and the authority's trees (certificates
	// logged, serials revoked).
	TreeSizes [2]uint64 `json:"tree_sizes"`
	// Cloud and Ceiling are the best of the runs of each (by
	// connections per second): the machine is shared, and the best run
	// is the one least disturbed. Runs lists every run in the order run
	// (ceiling, cloud, cloud, ceiling, … so that drift in the machine's
	// load falls on both alike).
	Cloud   *Throughput   `json:"cloud"`
	Ceiling *Throughput   `json:"ceiling"`
	Runs    []*Throughput `json:"runs"`
	// CloudNewLeaves is the cloud again, best of as many runs, with every
	// submission carrying a leaf the cloud has not parsed recently (the
	// other logged certificates in turn, past the cloud's certificate
	// cache); Cloud repeats one site's chain, whose certificates the cloud
	// parses once: the two bound a real mix of popular and rare sites.
	// Nil when the log holds too few other certificates to miss the cache.
	CloudNewLeaves *Throughput `json:"cloud_new_leaves,omitempty"`
	// NewLeafChainBytes is the mean size of those chains (not padded).
	NewLeafChainBytes int `json:"new_leaf_chain_bytes,omitempty"`
	// RatioNewLeaves is CloudNewLeaves.PerSecond / Ceiling.PerSecond.
	RatioNewLeaves float64 `json:"ratio_new_leaves,omitempty"`
	// CloudSCTs is a cloud whose ct prover also has a log list, proving
	// a certificate that carries SCTs embedded from SCTLogs listed logs
	// (the common case on the Web): its ct proof is the SCTs' inclusion
	// evidence, served from the prover's cache (the first submission
	// fetched it from the logs), instead of a sorted-tree proof.
	// CeilingSCTs is the echo server answering with that cloud's proofs
	// for that chain, run alternately with it; RatioSCTs
	// CloudSCTs.PerSecond / CeilingSCTs.PerSecond. SCTChainBytes is that
	// chain's size.
	CloudSCTs     *Throughput `json:"cloud_scts,omitempty"`
	CeilingSCTs   *Throughput `json:"ceiling_scts,omitempty"`
	SCTs          int         `json:"scts,omitempty"`
	SCTChainBytes int         `json:"sct_chain_bytes,omitempty"`
	RatioSCTs     float64     `json:"ratio_scts,omitempty"`
	// Ratio is Cloud.PerSecond / Ceiling.PerSecond; RatioPerCPU the same
	// per CPU second the process used, which a shared machine disturbs
	// less.
	Ratio           float64 `json:"ratio"`
	RatioPerCPU     float64 `json:"ratio_per_cpu"`
	PaperPerSecond  float64 `json:"paper_per_second"`
	TargetPerSecond float64 `json:"target_per_second"`
	TargetRatio     float64 `json:"target_ratio"`
	// MetTarget says whether both targets were reached.
	MetTarget bool `json:"met_target"`
}

// cloudProofs submits the site's chain once and returns the cloud's proofs,
// after checking that they verify: a bench that counted proofs no client
// would accept would measure nothing.
func cloudProofs(ctx context.Context, w *world, c *testbed.Cloud) (map[pkie.ID]*pkie.Proof, error) {
	return siteProofs(ctx, c, w.subject(), w.chains, w.verifiers)
}

// siteProofs is cloudProofs for any site: its subject, verified chains
// and the client's verifiers.
func siteProofs(ctx context.Context, c *testbed.Cloud, subj pkie.Subject, chains [][]*x509.Certificate, verifiers []pkie.Verifier) (map[pkie.ID]*pkie.Proof, error) {
	pin, err := c.Bundle.Pin()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	conn, reg, err := dialSession(dctx, Target{Name: "cloud", Addr: c.QUIC, Transport: pecwire.QUIC, Pin: pin}, clientQUIC())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := dctx.Deadline()
	sub := &pecwire.Submit{ClientID: reg.ClientID, Nonce: pecwire.Nonce{0xbe, 0x9c}, Budget: 10 * time.Second, ServerName: subj.ServerName, Port: 443,
		Requests: commonCase(), Chain: subj.Chain}
	if err := conn.Send(sub, deadline); err != nil {
		return nil, err
	}
	out := map[pkie.ID]*pkie.Proof{}
	for len(out) < len(sub.Requests) {
		m, err := conn.Recv(deadline)
		if err != nil {
			return nil, fmt.Errorf("pecbench: waiting for the cloud's proofs: %w", err)
		}
		p, ok := m.(*pecwire.Proof)
		if !ok {
			continue
		}
		if p.Status != pecwire.ProofOK {
			return nil, fmt.Errorf("pecbench: the cloud's %s outcome is %s: %s", p.ID, p.Status, p.Text)
		}
		out[p.ID] = p.Proof
	}
	for _, v := range verifiers {
		req := &pkie.VerifyRequest{Subject: subj, Proof: out[v.ID()], Now: time.Now(), VerifiedChains: chains}
		if a := v.Verify(ctx, req); a.Status != pkie.Pass {
			return nil, fmt.Errorf("pecbench: the cloud's %s proof does not pass: %s", v.ID(), a.Reason)
		}
	}
	return out, nil
}

func runThroughput(ctx context.Context, cfg *Config, w *world) (*ThroughputRow, error) {
	cfg.logf("throughput: starting the cloud")
	c, err := w.startCloud(ctx, "pec.bench", benchCloudConfig(cfg.Sessions))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	templates, err := cloudProofs(ctx, w, c)
	if err != nil {
		return nil, err
	}
	e, err := StartEcho(templates, c.QUICConfig())
	if err != nil {
		return nil, err
	}
	defer e.Close()
	cpin, err := c.Bundle.Pin()
	if err != nil {
		return nil, err
	}
	l := Load{Sessions: cfg.Sessions, Window: cfg.Window, Warmup: cfg.Warmup, Duration: cfg.Duration,
		ServerName: siteName, Port: 443, Chain: w.leaf.Chain, Requests: commonCase(), Budget: 5 * time.Second}
	cloudT := Target{Name: "cloud", Transport: cfg.Transport, Addr: c.QUIC, Pin: cpin}
	echoT := Target{Name: "echo ceiling", Transport: cfg.Transport, Addr: e.QUIC, Pin: e.Pin}
	if cfg.Transport == pecwire.TCP {
		cloudT.Addr, echoT.Addr = c.TCP, e.TCP
	}
	row := &ThroughputRow{ChainBytes: ChainBytes(w.leaf.Chain), ChainCerts: len(w.leaf.Chain), TreeSizes: w.treeSizes(),
		PaperPerSecond: PaperPerSecond, TargetPerSecond: TargetPerSecond, TargetRatio: TargetRatio}
	newT := Target{Name: "cloud, new leaves", Transport: cloudT.Transport, Addr: cloudT.Addr, Pin: cloudT.Pin}
	newL := l
	newL.Chains = w.fill
	order := []Target{echoT, cloudT}
	if len(w.fill) > 2*benchCertCache {
		order = append(order, newT)
		n := 0
		for _, c := range w.fill {
			n += ChainBytes(c)
		}
		row.NewLeafChainBytes = n / len(w.fill)
	}
	for r := range max(cfg.Rounds, 1) {
		for _, t := range order {
			cfg.logf("throughput: round %d, %s, %d sessions × %d in flight over %s, %v", r+1, t.Name, cfg.Sessions, cfg.Window, cfg.Transport, cfg.Duration)
			load := l
			if t.Name == newT.Name {
				load = newL
			}
			x, err := RunLoad(ctx, t, load)
			if err != nil {
				return nil, err
			}
			cfg.logf("throughput: %s %.0f/s on %.2f cores", t.Name, x.PerSecond, x.CPUCores)
			row.Runs = append(row.Runs, x)
			best := &row.Cloud
			switch t.Name {
			case echoT.Name:
				best = &row.Ceiling
			case newT.Name:
				best = &row.CloudNewLeaves
			}
			if *best == nil || x.PerSecond > (*best).PerSecond {
				*best = x
			}
		}
		slices.Reverse(order)
	}
	if row.Ceiling.PerSecond > 0 {
		row.Ratio = row.Cloud.PerSecond / row.Ceiling.PerSecond
	}
	if row.Ceiling.PerCPUSecond > 0 {
		row.RatioPerCPU = row.Cloud.PerCPUSecond / row.Ceiling.PerCPUSecond
	}
	if row.CloudNewLeaves != nil && row.Ceiling.PerSecond > 0 {
		row.RatioNewLeaves = row.CloudNewLeaves.PerSecond / row.Ceiling.PerSecond
	}
	row.MetTarget = row.Cloud.PerSecond >= TargetPerSecond && row.Ratio >= TargetRatio
	if err := runSCTThroughput(ctx, cfg, w, l, row); err != nil {
		return nil, err
	}
	return row, nil
}

// runSCTThroughput adds the SCT runs to row: a cloud whose ct prover has
// a log list, and its echo ceiling, on the SCT site's chain, alternating
// as the other runs do.
func runSCTThroughput(ctx context.Context, cfg *Config, w *world, l Load, row *ThroughputRow) error {
	dir, err := os.MkdirTemp("", "pkie-pecbench-scts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.logf("throughput: %d CT logs and a certificate with their SCTs", SCTLogs)
	site, err := newSCTSite(ctx, w, dir)
	if err != nil {
		return err
	}
	defer site.close()
	c, err := testbed.StartCloud(ctx, testbed.CloudOptions{Name: "pec.bench.scts", TTPs: w.ttps, CTLogList: site.listPath,
		Config: benchCloudConfig(cfg.Sessions)})
	if err != nil {
		return err
	}
	defer c.Close()
	// The first submission fetches the evidence from the logs; every
	// later one is served from the prover's cache.
	templates, err := siteProofs(ctx, c, site.subject(), site.chains, site.verifiers)
	if err != nil {
		return err
	}
	e, err := StartEcho(templates, c.QUICConfig())
	if err != nil {
		return err
	}
	defer e.Close()
	cpin, err := c.Bundle.Pin()
	if err != nil {
		return err
	}
	cloudT := Target{Name: "cloud, SCTs", Transport: cfg.Transport, Addr: c.QUIC, Pin: cpin}
	echoT := Target{Name: "echo, SCTs", Transport: cfg.Transport, Addr: e.QUIC, Pin: e.Pin}
	if cfg.Transport == pecwire.TCP {
		cloudT.Addr, echoT.Addr = c.TCP, e.TCP
	}
	l.Chain, l.Chains, l.ServerName = site.leaf.Chain, nil, "scts."+siteName
	row.SCTs, row.SCTChainBytes = SCTLogs, ChainBytes(site.leaf.Chain)
	order := []Target{echoT, cloudT}
	for r := range max(cfg.Rounds, 1) {
		for _, t := range order {
			cfg.logf("throughput: round %d, %s, %d sessions × %d in flight over %s, %v", r+1, t.Name, cfg.Sessions, cfg.Window, cfg.Transport, cfg.Duration)
			x, err := RunLoad(ctx, t, l)
			if err != nil {
				return err
			}
			cfg.logf("throughput: %s %.0f/s on %.2f cores", t.Name, x.PerSecond, x.CPUCores)
			row.Runs = append(row.Runs, x)
			best := &row.CloudSCTs
			if t.Name == echoT.Name {
				best = &row.CeilingSCTs
			}
			if *best == nil || x.PerSecond > (*best).PerSecond {
				*best = x
			}
		}
		slices.Reverse(order)
	}
	if row.CeilingSCTs.PerSecond > 0 {
		row.RatioSCTs = row.CloudSCTs.PerSecond / row.CeilingSCTs.PerSecond
	}
	return nil
}
