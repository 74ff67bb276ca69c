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
	Records int            // scan records (default 1,000,000)
	Chains  int            // distinct chains the records draw from (default 10,000)
	Roots   int            // trusted roots (default 40)
	Failed  float64        // share of records that are failures (default 0.1)
	CAAlg   testbed.KeyAlg // CA keys (default RSA-2048, as most real CAs)
	Seed    uint64
	Log     io.Writer
}

// GenResult describes a generated file.
type GenResult struct {
	Records int   `json:"records"`
	Chains  int   `json:"chains"`
	Roots   int   `json:"roots"`
	Bytes   int64 `json:"bytes"`
}

// Generate writes a scan file of c.Records records to w and the trusted
// roots as PEM to roots. Records draw their chains from a pool of c.Chains
// distinct chains, Zipf-distributed over roots and over chains as real
// sites share intermediates and CDNs share certificates; the CAs use
// RSA-2048 keys and leaves ECDSA P-256, so a record is about as long as a
// real one (3-4 KB). Some chains are cross-signed, some send the root, some
// only the leaf; a share of records are failures.
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
	logf := func(format string, a ...any) {
		if c.Log != nil {
			fmt.Fprintf(c.Log, format+"\n", a...)
		}
	}
	if c.CAAlg == "" {
		c.CAAlg = testbed.RSA2048
	}
	logf("generating %d roots with %s keys", c.Roots, c.CAAlg)
	var cas, ints []*testbed.CA
	for i := range c.Roots {
		r, err := testbed.NewRootCA(fmt.Sprintf("Gen Root CA %d", i), c.CAAlg)
		if err != nil {
			return nil, err
		}
		in, err := r.NewIntermediate(fmt.Sprintf("Gen Issuing CA %d", i), c.CAAlg)
		if err != nil {
			return nil, err
		}
		cas, ints = append(cas, r), append(ints, in)
		if _, err := roots.Write(r.PEM()); err != nil {
			return nil, err
		}
	}
	cross, err := cas[0].CrossSign(cas[1])
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0xbe7c4))
	rootZipf := rand.NewZipf(rng, 1.3, 1, uint64(c.Roots-1))
	logf("issuing %d leaves", c.Chains)
	pool := make([][]byte, c.Chains) // each chain's JSON array text
	for i := range pool {
		ri := int(rootZipf.Uint64())
		leaf, err := ints[ri].Issue(testbed.LeafOptions{DNSNames: []string{fmt.Sprintf("pool%06d.test", i)}})
		if err != nil {
			return nil, err
		}
		chain := leaf.Chain
		switch k := rng.IntN(100); {
		case k < 3:
			chain = append(chain, cas[ri].Cert.Raw) // sends the root
		case k < 5:
			chain = chain[:1] // leaf only
		case k < 10 && ri == 1:
			chain = append(chain, cross.Raw) // cross-signed
		}
		var b strings.Builder
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
		pool[i] = []byte(b.String())
	}
	chainZipf := rand.NewZipf(rng, 1.1, 10, uint64(c.Chains-1))
	ts := strconv.Quote(time.Now().UTC().Format(time.RFC3339Nano))
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	var line []byte
	logf("writing %d records", c.Records)
	for i := range c.Records {
		line = line[:0]
		line = append(line, `{"rank":`...)
		line = strconv.AppendInt(line, int64(i+1), 10)
		line = append(line, `,"domain":"site`...)
		line = strconv.AppendInt(line, int64(i+1), 10)
		line = append(line, `.test","ip":"127.0.0.1","port":443,"time":`...)
		line = append(line, ts...)
		line = append(line, `,"vantage":"gen","chain":`...)
		if rng.Float64() < c.Failed {
			line = append(line, `[],"error":"timeout: generated failure"}`...)
		} else {
			line = append(line, pool[chainZipf.Uint64()]...)
			line = append(line, `,"error":""}`...)
		}
		line = append(line, '\n')
		if _, err := cw.Write(line); err != nil {
			return nil, err
		}
		if c.Log != nil && (i+1)%200_000 == 0 {
			logf("  %d records", i+1)
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return &GenResult{Records: c.Records, Chains: c.Chains, Roots: c.Roots, Bytes: cw.n}, nil
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
