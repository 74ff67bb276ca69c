// Package scanbench measures the chain scanner and the root analysis
// against ceilings taken in the same run: scan throughput against raw Go
// TLS handshakes to the same synthetic web, and the analysis of a million
// generated scan records against merely reading them.
package scanbench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/internal/scan"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// ThroughputConfig shapes a scan-throughput run.
type ThroughputConfig struct {
	Sites       int // synthetic sites, each scanned once per round (default 2000)
	Concurrency int // workers, for the scanner and the ceiling alike (default 50)
	Listeners   int // TLS listeners (default 4)
	Rounds      int // alternating ceiling and scan rounds (default 3)
	Log         io.Writer
}

// ThroughputResult is handshakes per second, scanner and ceiling.
type ThroughputResult struct {
	Sites       int       `json:"sites"`
	Concurrency int       `json:"concurrency"`
	Listeners   int       `json:"listeners"`
	CPUs        int       `json:"cpus"`
	Scan        []float64 `json:"scan_per_second"`    // each round
	Ceiling     []float64 `json:"ceiling_per_second"` // each round
	ScanMean    float64   `json:"scan_mean"`
	CeilingMean float64   `json:"ceiling_mean"`
	Ratio       float64   `json:"ratio"` // ScanMean / CeilingMean; target ≥ 0.7
}

// Throughput starts a synthetic web and alternates rounds of raw TLS
// handshakes (the ceiling: dial, handshake with the prober's TLS settings,
// close, nothing else) and of
// pkie's scanner (probe, record, JSON to a file) over the same sites.
func Throughput(ctx context.Context, c ThroughputConfig) (*ThroughputResult, error) {
	if c.Sites <= 0 {
		c.Sites = 2000
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 50
	}
	if c.Listeners <= 0 {
		c.Listeners = 4
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	logf := func(format string, a ...any) {
		if c.Log != nil {
			fmt.Fprintf(c.Log, format+"\n", a...)
		}
	}
	logf("starting a synthetic web of %d sites on %d listeners", c.Sites, c.Listeners)
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: c.Sites, Listeners: c.Listeners, Seed: 1})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	out, err := os.CreateTemp("", "pkie-scanbench-*.jsonl")
	if err != nil {
		return nil, err
	}
	defer os.Remove(out.Name())
	defer out.Close()

	r := &ThroughputResult{Sites: c.Sites, Concurrency: c.Concurrency, Listeners: c.Listeners, CPUs: runtime.GOMAXPROCS(0)}
	for i := range c.Rounds {
		hs, err := rawHandshakes(ctx, w, c.Concurrency)
		if err != nil {
			return nil, err
		}
		r.Ceiling = append(r.Ceiling, hs)
		if err := out.Truncate(0); err != nil {
			return nil, err
		}
		out.Seek(0, io.SeekStart)
		start := time.Now()
		sum, err := scan.Run(ctx, scan.NewListReader(bytes.NewReader(w.SiteList())), out, scan.Options{
			Probe:       probe.Options{Lookup: w.Resolver.Lookup, AllowPrivate: true, Vantage: "bench"},
			Concurrency: c.Concurrency,
		})
		if err != nil {
			return nil, err
		}
		if sum.OK != c.Sites {
			return nil, fmt.Errorf("scanbench: scan answered %d of %d sites", sum.OK, c.Sites)
		}
		sc := float64(sum.Scanned) / time.Since(start).Seconds()
		r.Scan = append(r.Scan, sc)
		logf("round %d: raw TLS %.0f handshakes/s, scan %.0f sites/s", i+1, hs, sc)
	}
	r.ScanMean, r.CeilingMean = mean(r.Scan), mean(r.Ceiling)
	if r.CeilingMean > 0 {
		r.Ratio = r.ScanMean / r.CeilingMean
	}
	return r, nil
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// rawHandshakes does one TLS handshake per site with conc workers and
// returns handshakes per second.
func rawHandshakes(ctx context.Context, w *testbed.SynthWeb, conc int) (float64, error) {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(w.Sites) || ctx.Err() != nil {
					return
				}
				s := w.Sites[i]
				conn, err := d.DialContext(ctx, "tcp", s.Addr.String())
				if err == nil {
					// The same TLS parameters as the prober's, so the ceiling
					// does the same cryptography.
					tc := tls.Client(conn, &tls.Config{
						ServerName: s.Domain, InsecureSkipVerify: true,
						MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13,
						CurvePreferences: probe.CurvePreferences(),
					})
					err = tc.HandshakeContext(ctx)
					conn.Close()
				}
				if err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("scanbench: raw handshake: %w", firstErr)
	}
	return float64(len(w.Sites)) / time.Since(start).Seconds(), nil
}

// GenConfig shapes a generated scan file.
type GenConfig struct {
	Records int // scan records (default 1,000,000)
	Chains  int // distinct chains the records draw from (default 10,000)
	// Distinct gives every answered record a leaf of its own, as on the
	// real web, where only CDNs and large companies share certificates;
	// Chains is then ignored.
	Distinct bool
	Roots    int     // trusted roots (default 40)
	Failed   float64 // share of records that are failures (default 0.1)
	// CAAlgs are the CAs' key types, taken by the roots in turn (root i
	// uses CAAlgs[i%len]); default RSA-2048 only, as most real CAs.
	CAAlgs  []testbed.KeyAlg
	Workers int // parallel leaf issuance (default GOMAXPROCS)
	Seed    uint64
	Log     io.Writer
}

// GenResult describes a generated file.
type GenResult struct {
	Records int   `json:"records"`
	Chains  int   `json:"chains"` // distinct chains written
	Roots   int   `json:"roots"`
	Bytes   int64 `json:"bytes"`
	// LeavesByIssuerAlg counts the distinct leaves by their issuer's key
	// type: the signature a verifier checks once per distinct leaf.
	LeavesByIssuerAlg map[testbed.KeyAlg]int `json:"leaves_by_issuer_alg"`
}

// chainPlan is what the seeded generator decided for one chain; issuing
// it (the signature) happens in parallel.
type chainPlan struct {
	root int // index of the root (and its intermediate)
	kind int // 0..99: <3 sends the root, <5 leaf only, <10 on root 1 cross-signed
}

// Generate writes a scan file of c.Records records to w and the trusted
// roots as PEM to roots. Records draw their chains from a pool of c.Chains
// distinct chains (or each has its own, with c.Distinct), Zipf-distributed
// over roots, and over chains as real sites share intermediates and CDNs
// share certificates; leaves are ECDSA P-256, so a record is about as long
// as a real one. Some chains are cross-signed, some send the root, some
// only the leaf; a share of records are failures. The file's content is
// fixed by c.Seed apart from keys and signatures.
func Generate(w io.Writer, roots io.Writer, c GenConfig) (*GenResult, error) {
	if c.Records <= 0 {
		c.Records = 1_000_000
	}
	if c.Chains <= 0 {
		c.Chains = 10_000
	}
	if c.Roots < 2 {
		c.Roots = 40
	}
	if c.Failed == 0 {
		c.Failed = 0.1
	}
	if len(c.CAAlgs) == 0 {
		c.CAAlgs = []testbed.KeyAlg{testbed.RSA2048}
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	logf := func(format string, a ...any) {
		if c.Log != nil {
			fmt.Fprintf(c.Log, format+"\n", a...)
		}
	}
	logf("generating %d roots with %v keys", c.Roots, c.CAAlgs)
	g := &generator{res: GenResult{Records: c.Records, Roots: c.Roots, LeavesByIssuerAlg: map[testbed.KeyAlg]int{}}}
	for i := range c.Roots {
		alg := c.CAAlgs[i%len(c.CAAlgs)]
		r, err := testbed.NewRootCA(fmt.Sprintf("Gen Root CA %d", i), alg)
		if err != nil {
			return nil, err
		}
		in, err := r.NewIntermediate(fmt.Sprintf("Gen Issuing CA %d", i), alg)
		if err != nil {
			return nil, err
		}
		g.cas, g.ints, g.algs = append(g.cas, r), append(g.ints, in), append(g.algs, alg)
		if _, err := roots.Write(r.PEM()); err != nil {
			return nil, err
		}
	}
	var err error
	if g.cross, err = g.cas[0].CrossSign(g.cas[1]); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0xbe7c4))
	rootZipf := rand.NewZipf(rng, 1.3, 1, uint64(c.Roots-1))
	plan := func() chainPlan { return chainPlan{root: int(rootZipf.Uint64()), kind: rng.IntN(100)} }

	ts := strconv.Quote(time.Now().UTC().Format(time.RFC3339Nano))
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	var line []byte
	record := func(i int, chain []byte) error {
		line = line[:0]
		line = append(line, `{"rank":`...)
		line = strconv.AppendInt(line, int64(i+1), 10)
		line = append(line, `,"domain":"site`...)
		line = strconv.AppendInt(line, int64(i+1), 10)
		line = append(line, `.test","ip":"127.0.0.1","port":443,"time":`...)
		line = append(line, ts...)
		line = append(line, `,"vantage":"gen","chain":`...)
		if chain == nil {
			line = append(line, `[],"error":"timeout: generated failure"}`...)
		} else {
			line = append(line, chain...)
			line = append(line, `,"error":""}`...)
		}
		line = append(line, '\n')
		_, err := cw.Write(line)
		return err
	}
	progress := func(i int) {
		if c.Log != nil && (i+1)%100_000 == 0 {
			logf("  %d records", i+1)
		}
	}

	if c.Distinct {
		// Stream in blocks: decide serially, issue in parallel, write in
		// order, so memory stays flat however many records.
		logf("writing %d records, each answered one with its own leaf (%d issuing workers)", c.Records, c.Workers)
		const block = 4096
		plans := make([]chainPlan, 0, block)
		failed := make([]bool, 0, block)
		for lo := 0; lo < c.Records; lo += block {
			hi := min(lo+block, c.Records)
			plans, failed = plans[:0], failed[:0]
			for range hi - lo {
				f := rng.Float64() < c.Failed
				failed = append(failed, f)
				var p chainPlan
				if !f {
					p = plan()
				}
				plans = append(plans, p)
			}
			chains, err := g.issueAll(plans, lo, c.Workers, func(j int) bool { return !failed[j] })
			if err != nil {
				return nil, err
			}
			for j := range plans {
				if err := record(lo+j, chains[j]); err != nil {
					return nil, err
				}
				progress(lo + j)
			}
		}
	} else {
		logf("issuing %d leaves (%d workers)", c.Chains, c.Workers)
		plans := make([]chainPlan, c.Chains)
		for i := range plans {
			plans[i] = plan()
		}
		pool, err := g.issueAll(plans, 0, c.Workers, func(int) bool { return true })
		if err != nil {
			return nil, err
		}
		chainZipf := rand.NewZipf(rng, 1.1, 10, uint64(c.Chains-1))
		logf("writing %d records", c.Records)
		for i := range c.Records {
			var chain []byte
			if rng.Float64() >= c.Failed {
				chain = pool[chainZipf.Uint64()]
			}
			if err := record(i, chain); err != nil {
				return nil, err
			}
			progress(i)
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	g.res.Bytes = cw.n
	return &g.res, nil
}

// generator holds the generated hierarchy.
type generator struct {
	cas, ints []*testbed.CA
	algs      []testbed.KeyAlg
	cross     *x509.Certificate
	res       GenResult
}

// issueAll issues the chains for plans[j] where want(j), named by base+j,
// on workers goroutines, and returns each chain's JSON array text (nil
// where not wanted).
func (g *generator) issueAll(plans []chainPlan, base, workers int, want func(int) bool) ([][]byte, error) {
	out := make([][]byte, len(plans))
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1) - 1)
				if j >= len(plans) {
					return
				}
				if !want(j) {
					continue
				}
				b, err := g.issue(plans[j], base+j)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				out[j] = b
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	for j := range plans {
		if out[j] != nil {
			g.res.Chains++
			g.res.LeavesByIssuerAlg[g.algs[plans[j].root]]++
		}
	}
	return out, nil
}

// issue makes chain n as planned and renders it as a JSON array of base64.
func (g *generator) issue(p chainPlan, n int) ([]byte, error) {
	leaf, err := g.ints[p.root].Issue(testbed.LeafOptions{DNSNames: []string{fmt.Sprintf("leaf%07d.test", n)}})
	if err != nil {
		return nil, err
	}
	chain := leaf.Chain
	switch k := p.kind; {
	case k < 3:
		chain = append(chain, g.cas[p.root].Cert.Raw) // sends the root
	case k < 5:
		chain = chain[:1] // leaf only
	case k < 10 && p.root == 1:
		chain = append(chain, g.cross.Raw) // cross-signed
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for j, der := range chain {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(base64.StdEncoding.EncodeToString(der))
		b.WriteByte('"')
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// PeakRSS returns the process's peak resident set size (VmHWM) in bytes,
// or 0 where /proc does not say.
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// ReadCeiling reads a file line by line doing nothing else: the floor
// under any analysis of it. It returns lines and bytes per second.
func ReadCeiling(path string) (lines int, perSec float64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	start := time.Now()
	err = scan.ReadLines(f, func(scan.Line) error { lines++; return nil })
	return lines, float64(lines) / time.Since(start).Seconds(), err
}
