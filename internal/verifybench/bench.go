// Package verifybench measures pkie's certificate-verification back ends
// (package verify) the way the Servo certificate-verification experiment
// did, on loopback: testbed sites shaped like the experiment's thirteen
// sites behind a delay proxy, each connected to and its chain verified by
// every back end with the phases timed; and the cost of one verification
// per chain shape and key type beside a ceiling from the same run, the
// bare signature checks of the path done one after another and
// concurrently. "pkie bench verify" prints and draws it.
package verifybench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/verify"
)

// Config is one run.
type Config struct {
	// Sites and Shapes name what to measure (nil: none of that kind).
	Sites  []string
	Shapes []string
	// Backends, Dirs and HelperTimeout open the back ends (verify.Open).
	Backends      []string
	Dirs          []string
	HelperTimeout time.Duration
	// N is the verifications per back end and site or shape; the
	// signature ceilings run N times too.
	N int
	// Conns is the connections per site and method.
	Conns int
	// RTT is the delay proxy's round trip.
	RTT time.Duration
	// TLS13 lets the sites speak TLS 1.3; by default they stop at 1.2,
	// which every site of the experiment spoke (2017).
	TLS13 bool
	// Roots is the trust store every verification is given, the
	// testbed's roots added.
	Roots *RootStore
	// Progress, if set, gets a line per step.
	Progress io.Writer
}

// Check reports what is wrong with c.
func (c *Config) Check() error {
	switch {
	case c.N < 1:
		return errors.New("n must be at least 1")
	case c.Conns < 1:
		return errors.New("conns must be at least 1")
	case c.RTT < 0:
		return errors.New("rtt must not be negative")
	case c.Roots == nil || len(c.Roots.DER) == 0:
		return errors.New("no root store")
	case len(c.Sites) == 0 && len(c.Shapes) == 0:
		return errors.New("nothing to measure: no site and no shape")
	}
	for _, s := range c.Sites {
		if _, ok := LookupSite(s); !ok {
			return fmt.Errorf("unknown site %q (known: %s)", s, strings.Join(SiteNames(), ", "))
		}
	}
	for _, s := range c.Shapes {
		if _, ok := LookupShape(s); !ok {
			return fmt.Errorf("unknown shape %q (known: %s)", s, strings.Join(ShapeNames(), ", "))
		}
	}
	return nil
}

// Report is a run's results.
type Report struct {
	Started    time.Time `json:"started"`
	Seconds    float64   `json:"seconds"`
	GoVersion  string    `json:"go_version"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	// LoadStart and LoadEnd are the 1-minute load average (Linux) at
	// the start and end; -1 when unknown.
	LoadStart float64 `json:"load_start"`
	LoadEnd   float64 `json:"load_end"`

	N          int           `json:"n"`
	Conns      int           `json:"conns"`
	RTT        time.Duration `json:"rtt_ns"`
	TLS        string        `json:"tls"`
	RootSource string        `json:"root_source"`
	// RootCount is the size of the trust store each back end builds,
	// the testbed's roots included.
	RootCount int `json:"root_count"`

	Backends []BackendInfo    `json:"backends"`
	Missing  []verify.Missing `json:"missing,omitempty"`
	Sites    []SiteResult     `json:"sites,omitempty"`
	Shapes   []ShapeResult    `json:"shapes,omitempty"`
	// Comparison sums the sites up; nil without sites.
	Comparison *Comparison `json:"comparison,omitempty"`
}

// BackendInfo names a back end that ran.
type BackendInfo struct {
	Name    string `json:"name"`
	Library string `json:"library"`
}

// Phases summarizes a back end's phases over the verifications of one
// site or shape.
type Phases = verify.PhaseSummary

// Summary is a sample of durations reduced to mean, p50, p99 and extremes.
type Summary = verify.Summary

// Method is one back end on one site or shape.
type Method struct {
	Backend string `json:"backend"`
	// Valid, Code and Reason are the verdict (the last verification's;
	// a back end that changes its mind is reported in Disagreed).
	Valid     bool        `json:"valid"`
	Code      verify.Code `json:"code"`
	Reason    string      `json:"reason,omitempty"`
	Disagreed int         `json:"disagreed,omitempty"`
	// Errors counts verifications that got no verdict; Error is the
	// first.
	Errors int    `json:"errors,omitempty"`
	Error  string `json:"error,omitempty"`
	Phases Phases `json:"phases"`
	// Connect is the time to connect, TCP and TLS handshake with this
	// back end verifying the chain inside the handshake: the Servo
	// experiment's "total connection time". Sites only.
	Connect *Summary `json:"connect,omitempty"`
	// Paper is the Servo experiment's figures for the same site and the
	// method this back end stands in for; nil for go and for shapes.
	Paper *Servo `json:"paper,omitempty"`
}

// SiteResult is one site.
type SiteResult struct {
	Site   string `json:"site"`
	Host   string `json:"host"`
	Shape  string `json:"shape"`
	Sent   int    `json:"sent"`
	Issuer string `json:"issuer"`
	// Connect is the time to connect with no verification at all: the
	// ceiling every method's connection time is set beside.
	Connect Summary  `json:"connect"`
	Methods []Method `json:"methods"`
}

// ShapeResult is one chain shape.
type ShapeResult struct {
	Shape Shape  `json:"shape"`
	Path  string `json:"path"`
	Links int    `json:"links"`
	// SignaturesSerial and SignaturesParallel are the path's signature
	// checks in Go (x509.Certificate.CheckSignatureFrom), one after
	// another and one goroutine each.
	SignaturesSerial   Summary  `json:"signatures_serial"`
	SignaturesParallel Summary  `json:"signatures_parallel"`
	Methods            []Method `json:"methods"`
}

// Run measures what c names.
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("verifybench: %w", err)
	}
	r := &Report{Started: time.Now().UTC(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		LoadStart: loadAverage(), N: c.N, Conns: c.Conns, RTT: c.RTT, TLS: "1.2", RootSource: c.Roots.Source}
	if c.TLS13 {
		r.TLS = "1.3"
	}
	backends, missing, err := verify.Open(ctx, verify.Options{Names: c.Backends, Dirs: c.Dirs, Timeout: c.HelperTimeout})
	if err != nil {
		return nil, fmt.Errorf("verifybench: %w", err)
	}
	defer verify.CloseAll(backends)
	r.Missing = missing
	for _, m := range missing {
		c.progress("back end %s missing: %s", m.Name, m.Why)
	}
	if len(backends) == 0 {
		return nil, errors.New("verifybench: no back end could be opened")
	}
	for _, b := range backends {
		r.Backends = append(r.Backends, BackendInfo{Name: b.Name(), Library: b.Library()})
	}
	if len(c.Sites) > 0 {
		if err := runSites(ctx, &c, backends, r); err != nil {
			return nil, err
		}
	}
	for _, name := range c.Shapes {
		s, _ := LookupShape(name)
		sr, err := runShape(ctx, &c, backends, s)
		if err != nil {
			return nil, err
		}
		r.Shapes = append(r.Shapes, *sr)
	}
	if r.RootCount == 0 {
		r.RootCount = len(c.Roots.DER) + 1
	}
	r.compare()
	r.addPaper()
	r.LoadEnd = loadAverage()
	r.Seconds = time.Since(r.Started).Seconds()
	return r, nil
}

func (c *Config) progress(format string, a ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", a...)
	}
}

// samples collects one back end's verifications.
type samples struct {
	backend           string
	timings           verify.Samples
	last              *verify.Result
	disagreed, errors int
	firstErr          string
}

func (s *samples) add(res verify.Result, err error) {
	if err != nil {
		if s.errors == 0 {
			s.firstErr = err.Error()
		}
		s.errors++
		return
	}
	if s.last != nil && (s.last.Valid != res.Valid || s.last.Code != res.Code) {
		s.disagreed++
	}
	s.last = &res
	s.timings.Add(res)
}

func (s *samples) method() Method {
	m := Method{Backend: s.backend, Disagreed: s.disagreed, Errors: s.errors, Error: s.firstErr}
	if s.last != nil {
		m.Valid, m.Code = s.last.Valid, s.last.Code
		if !m.Valid {
			m.Reason = s.last.Reason
		}
	}
	m.Phases = s.timings.Summary(s.backend == "go-parallel")
	return m
}

// warmUp has every back end verify req once, uncounted, so that no
// library's one-time set-up is charged to the first sample; an error
// shows again in the counted runs.
func warmUp(ctx context.Context, backends []verify.Backend, req *verify.Request) {
	for _, b := range backends {
		b.Verify(ctx, req)
	}
}

// verifyN runs every back end n times on req, interleaved (one of each in
// turn), so that a change in the machine's load falls on all alike.
func verifyN(ctx context.Context, backends []verify.Backend, req *verify.Request, n int) ([]*samples, error) {
	out := make([]*samples, len(backends))
	for i, b := range backends {
		out[i] = &samples{backend: b.Name()}
	}
	for range n {
		for i, b := range backends {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			out[i].add(b.Verify(ctx, req))
		}
	}
	return out, nil
}

func runShape(ctx context.Context, c *Config, backends []verify.Backend, s Shape) (*ShapeResult, error) {
	c.progress("shape %s (%s): issuing", s.Name, s)
	host := "www." + s.Name + ".test"
	ch, err := IssueShape(s, host)
	if err != nil {
		return nil, err
	}
	req := &verify.Request{Roots: c.Roots.With(ch.Root.Cert.Raw), Chain: ch.Sent(), Host: host, Time: time.Now(), Purpose: verify.Server}
	warmUp(ctx, backends, req)
	c.progress("shape %s: %d verifications per back end", s.Name, c.N)
	smp, err := verifyN(ctx, backends, req, c.N)
	if err != nil {
		return nil, err
	}
	sr := &ShapeResult{Shape: s, Path: s.String(), Links: len(ch.Path) - 1}
	for _, x := range smp {
		sr.Methods = append(sr.Methods, x.method())
	}
	// The ceilings are measured after the back ends, on certificates
	// parsed once: what is left is the signatures alone. The first round
	// is uncounted, as for the back ends.
	serial := make([]time.Duration, 0, c.N)
	parallel := make([]time.Duration, 0, c.N)
	for i := range c.N + 1 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t := time.Now()
		if err := CheckSignaturesSerial(ch.Path); err != nil {
			return nil, fmt.Errorf("verifybench: shape %s: %w", s.Name, err)
		}
		ds := time.Since(t)
		t = time.Now()
		if err := CheckSignaturesParallel(ch.Path); err != nil {
			return nil, fmt.Errorf("verifybench: shape %s: %w", s.Name, err)
		}
		dp := time.Since(t)
		if i > 0 {
			serial, parallel = append(serial, ds), append(parallel, dp)
		}
	}
	sr.SignaturesSerial, sr.SignaturesParallel = verify.Summarize(serial), verify.Summarize(parallel)
	return sr, nil
}

// loadAverage is the 1-minute load average, or -1 where /proc/loadavg is
// not to be had.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
