// Package pecbench measures the PEC cloud and its client the way "Towards
// Sustainable Evolution for the TLS PKI" (PEC, ASIA CCS 2018, §6) does, each
// figure beside a ceiling measured in the same run on the same machine:
//
//   - throughput: connections proved per second through the cloud (CT and
//     revocation, the certificate logged and not revoked, the paper's
//     common case) by many concurrent clients over QUIC, beside an echo
//     server on the same transport answering the same frames without
//     proving (the paper: 1,900 connections/s on a 2-vCPU t2.medium);
//   - client cost: verifying one connection's proofs with a warm head
//     cache, beside the bare SHA-256 work of the audit paths and the cold
//     cost of opening the signed heads every time (the paper, Tables 1
//     and 2: 189 µs for a CT presence proof and 207 µs for a revocation
//     absence proof, every time);
//   - latency inflation of client-only PEC over loopback delay proxies at
//     several client–server and client–cloud distances (the paper's
//     Figure 5 shape);
//   - failover to a second cloud, proof delivery under datagram loss and
//     the fallback to TCP when UDP is blocked.
package pecbench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Rows a run can measure, in the order they run.
const (
	RowThroughput = "throughput"
	RowClient     = "client"
	RowLatency    = "latency"
	RowFailover   = "failover"
	RowLoss       = "loss"
	RowBlocked    = "blocked"
)

// AllRows lists every row.
var AllRows = []string{RowThroughput, RowClient, RowLatency, RowFailover, RowLoss, RowBlocked}

// Paper figures and the targets.
const (
	// PaperPerSecond is the PEC paper's cloud throughput (§6.3.2) on a
	// 2-vCPU t2.medium.
	PaperPerSecond = 1900
	// TargetPerSecond and TargetRatio are what this machine should reach:
	// connections proved per second, and the fraction of the echo ceiling.
	TargetPerSecond = 10000
	TargetRatio     = 0.5
)

// Config says what to measure. Zero values take the defaults.
type Config struct {
	// Rows to run (AllRows when empty).
	Rows []string
	// Progress receives a line per step; nil for none.
	Progress io.Writer

	// Throughput: Sessions clients with Window submissions in flight
	// each, over Transport (pecwire.QUIC by default), counted for
	// Duration after Warmup.
	Sessions  int
	Window    int
	Warmup    time.Duration
	Duration  time.Duration
	Transport string
	// Rounds is how many times each of the ceiling and the cloud is
	// run, alternating (default 2).
	Rounds int

	// Client cost: tree sizes (the paper's by default), samples per
	// tree (at least 1000) and where the tree files go.
	CTLeaves      uint64
	RevokedLeaves uint64
	Samples       int
	Dir           string

	// The cloud rows' log holds the site's certificate and LogFill
	// others; the authority has RevokedFill serials revoked (the
	// paper's CRL by default), so proofs have realistic depths. Zero
	// means the default, a negative count none.
	LogFill     int
	RevokedFill int

	// Latency: client–server and client–cloud round trips, and
	// handshakes per point.
	ServerRTTs []time.Duration
	CloudRTTs  []time.Duration
	Handshakes int

	// Failover and blocked: trials per row. Loss: the fraction of
	// datagrams dropped each way and the submissions timed with and
	// without it.
	Trials      int
	Loss        float64
	LossSamples int
}

func (c *Config) defaults() {
	if len(c.Rows) == 0 {
		c.Rows = AllRows
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Sessions <= 0 {
		c.Sessions = 64
	}
	if c.Window <= 0 {
		c.Window = 8
	}
	if c.Warmup <= 0 {
		c.Warmup = time.Second
	}
	if c.Duration <= 0 {
		c.Duration = 5 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 2
	}
	if c.Transport == "" {
		c.Transport = "quic"
	}
	if c.CTLeaves == 0 {
		c.CTLeaves = PaperCTLeaves
	}
	if c.RevokedLeaves == 0 {
		c.RevokedLeaves = PaperRevokedLeaves
	}
	if c.Samples <= 0 {
		c.Samples = 1000
	}
	if c.LogFill == 0 {
		c.LogFill = 4095
	}
	if c.RevokedFill == 0 {
		c.RevokedFill = PaperRevokedLeaves
	}
	if len(c.ServerRTTs) == 0 {
		c.ServerRTTs = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	}
	if len(c.CloudRTTs) == 0 {
		c.CloudRTTs = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	}
	if c.Handshakes <= 0 {
		c.Handshakes = 20
	}
	if c.Trials <= 0 {
		c.Trials = 10
	}
	if c.Loss == 0 {
		c.Loss = 0.2
	}
	if c.LossSamples <= 0 {
		c.LossSamples = 200
	}
}

// Check reports what is wrong with c before anything runs.
func (c *Config) Check() error {
	for _, r := range c.Rows {
		if !slices.Contains(AllRows, r) {
			return fmt.Errorf("unknown row %q (rows: %s)", r, strings.Join(AllRows, ", "))
		}
	}
	if c.Samples != 0 && c.Samples < 1000 {
		return fmt.Errorf("%d samples; the client-cost row needs at least 1000", c.Samples)
	}
	if c.Loss < 0 || c.Loss >= 1 {
		return fmt.Errorf("loss %v outside [0, 1)", c.Loss)
	}
	switch c.Transport {
	case "", "quic", "tcp":
	default:
		return fmt.Errorf("transport %q: want quic or tcp", c.Transport)
	}
	return nil
}

// Machine describes where a run ran.
type Machine struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GoVersion  string `json:"go_version"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// Report is a whole run. Rows not run are absent.
type Report struct {
	Machine    Machine        `json:"machine"`
	Started    time.Time      `json:"started"`
	Seconds    float64        `json:"seconds"`
	Throughput *ThroughputRow `json:"throughput,omitempty"`
	ClientCost *ClientCost    `json:"client_cost,omitempty"`
	Latency    *LatencyRow    `json:"latency,omitempty"`
	Failover   *FailoverRow   `json:"failover,omitempty"`
	Loss       *LossRow       `json:"loss,omitempty"`
	Blocked    *BlockedRow    `json:"blocked,omitempty"`
}

func (c *Config) logf(format string, a ...any) {
	fmt.Fprintf(c.Progress, format+"\n", a...)
}

// Run measures the rows cfg names.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("pecbench: %w", err)
	}
	cfg.defaults()
	rep := &Report{
		Machine: Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0)},
		Started: time.Now().UTC(),
	}
	want := func(r string) bool { return slices.Contains(cfg.Rows, r) }
	var err error
	// Every row but the tree-level client cost runs on one world.
	var w *world
	if len(cfg.Rows) > 0 {
		cfg.logf("building the world: CA, log, revocation authority, a %d-byte chain", PaperFlightBytes)
		if w, err = newWorld(ctx, max(cfg.LogFill, 0), max(cfg.RevokedFill, 0), cfg.logf); err != nil {
			return nil, err
		}
		defer w.close()
	}
	if want(RowThroughput) {
		if rep.Throughput, err = runThroughput(ctx, &cfg, w); err != nil {
			return nil, err
		}
	}
	if want(RowClient) {
		cfg.logf("client cost: trees of %d and %d keys", cfg.CTLeaves, cfg.RevokedLeaves)
		if rep.ClientCost, err = treeCost(ctx, cfg.CTLeaves, cfg.RevokedLeaves, cfg.Samples, cfg.Dir, cfg.Progress); err != nil {
			return nil, err
		}
		cfg.logf("client cost: the client's verifiers on the cloud's proofs")
		c, err := w.startCloud(ctx, "pec.bench", benchCloudConfig(1))
		if err != nil {
			return nil, err
		}
		proofs, err := cloudProofs(ctx, w, c)
		c.Close()
		if err != nil {
			return nil, err
		}
		if rep.ClientCost.Verifier, err = verifierCost(ctx, w, proofs, cfg.Samples); err != nil {
			return nil, err
		}
	}
	if want(RowLatency) {
		if rep.Latency, err = runLatency(ctx, &cfg, w); err != nil {
			return nil, err
		}
	}
	if want(RowFailover) {
		if rep.Failover, err = runFailover(ctx, &cfg, w); err != nil {
			return nil, err
		}
	}
	if want(RowLoss) {
		if rep.Loss, err = runLoss(ctx, &cfg, w); err != nil {
			return nil, err
		}
	}
	if want(RowBlocked) {
		if rep.Blocked, err = runBlocked(ctx, &cfg, w); err != nil {
			return nil, err
		}
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}
