// Package obcbench measures origin-bound client certificates (pkie bench
// obc) against Origin-Bound Certificates (Dietz, Czeskis, Balfanz, Wallach;
// USENIX Security 2012, §6): the client's key and certificate generation
// per algorithm, with and without a key pool (Figure 8); the page fetch
// latency of a first and a return visit through a delay proxy (Figures
// 6–7); and a TLS-terminating reverse proxy under a fixed request rate with
// and without client certificates of each algorithm: its memory, CPU and
// the latency it adds (Figures 9–14).
package obcbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Rows of a run.
const (
	RowGen        = "gen"
	RowFetch      = "fetch"
	RowTerminator = "terminator"
)

// AllRows are the rows Run measures by default.
var AllRows = []string{RowGen, RowTerminator}

// Config says what to measure. Zero fields take the defaults noted.
type Config struct {
	Rows []string // default AllRows
	Algs []string // client key algorithms of the gen and fetch rows; default Algs

	// GenSamples is the key and certificate generations timed per
	// algorithm (default 20).
	GenSamples int

	// RTT is the delay proxy's round trip in the fetch row (default
	// 50 ms); FetchSamples the fetches per case (default 20); PageBytes
	// the page's size (default 48 KiB).
	RTT          time.Duration
	FetchSamples int
	PageBytes    int

	// The terminator row: Cases are the client keys (default
	// TerminatorCases), Rate the requests per second (default 200),
	// Duration the measured window after Warmup (defaults 30 s and 5 s),
	// Resumed the share of requests on resumed sessions (default 0.8; a
	// negative share means none),
	// Clients the simulated clients, each with its own key and session
	// cache (default 32), CeilingDuration the length of the raw handshake
	// ceiling (default 5 s), Seed seeds the request mix.
	Cases           []string
	Rate            float64
	Duration        time.Duration
	Warmup          time.Duration
	Resumed         float64
	Clients         int
	CeilingDuration time.Duration
	Seed            uint64
	// Exec, when set, is the command line that starts a terminator child
	// ("pkie bench obc --terminator-only" takes its flags after it), so
	// that its CPU time and memory are its own. Without it the terminator
	// runs in this process and its CPU and memory figures include the
	// load generator's and the backend's.
	Exec []string

	// Progress receives one line per step (default discarded).
	Progress io.Writer
}

// TerminatorCases are the terminator row's client keys, in the paper's
// order ("none" is no client certificate; the paper's sect163k1 ECDSA has
// no Go implementation, P-256 stands in).
var TerminatorCases = []string{"none", "ecdsa-p256", "rsa-1024", "rsa-2048"}

// Check reports a configuration Run would refuse.
func (c *Config) Check() error {
	for _, r := range c.Rows {
		if !slices.Contains(AllRows, r) {
			return fmt.Errorf("unknown row %q (rows: %s)", r, strings.Join(AllRows, ", "))
		}
	}
	for _, a := range c.Algs {
		if !slices.Contains(Algs, a) {
			return fmt.Errorf("unknown algorithm %q (algorithms: %s)", a, strings.Join(Algs, ", "))
		}
	}
	for _, a := range c.Cases {
		if a != "none" && !slices.Contains(Algs, a) {
			return fmt.Errorf("unknown case %q (cases: none, %s)", a, strings.Join(Algs, ", "))
		}
	}
	switch {
	case c.GenSamples < 0, c.FetchSamples < 0, c.PageBytes < 0, c.Clients < 0:
		return fmt.Errorf("negative count")
	case c.Rate < 0, c.Duration < 0, c.Warmup < 0, c.CeilingDuration < 0, c.RTT < 0:
		return fmt.Errorf("negative rate or duration")
	case c.Resumed >= 1:
		return fmt.Errorf("resumed share %v outside [0, 1)", c.Resumed)
	case c.Rate > 100000:
		return fmt.Errorf("rate %v above 100000 requests/s", c.Rate)
	}
	return nil
}

func (c *Config) defaults() {
	if len(c.Rows) == 0 {
		c.Rows = AllRows
	}
	if len(c.Algs) == 0 {
		c.Algs = Algs
	}
	if len(c.Cases) == 0 {
		c.Cases = TerminatorCases
	}
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defd := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.GenSamples, 20)
	def(&c.FetchSamples, 20)
	def(&c.PageBytes, 48<<10)
	def(&c.Clients, 32)
	defd(&c.RTT, 50*time.Millisecond)
	defd(&c.Duration, 30*time.Second)
	defd(&c.Warmup, 5*time.Second)
	defd(&c.CeilingDuration, 5*time.Second)
	if c.Rate == 0 {
		c.Rate = 200
	}
	if c.Resumed == 0 {
		c.Resumed = 0.8
	} else if c.Resumed < 0 {
		c.Resumed = 0
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

func (c *Config) logf(format string, a ...any) {
	fmt.Fprintf(c.Progress, format+"\n", a...)
}

// Machine describes where a run ran.
type Machine struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GoVersion  string `json:"go_version"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// LoadAvg is /proc/loadavg's 1-minute figure at the start and the
	// end of the run (other work on the machine competes for its cores).
	LoadAvgStart float64 `json:"load_avg_start"`
	LoadAvgEnd   float64 `json:"load_avg_end"`
}

// Report is a whole run; rows not run are absent.
type Report struct {
	Machine    Machine        `json:"machine"`
	Started    time.Time      `json:"started"`
	Seconds    float64        `json:"seconds"`
	Gen        []GenRow       `json:"gen,omitempty"`
	Terminator *TerminatorRow `json:"terminator,omitempty"`
}

// Run measures the rows cfg names.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("obcbench: %w", err)
	}
	cfg.defaults()
	start := time.Now()
	rep := &Report{
		Machine: Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
			GOMAXPROCS: runtime.GOMAXPROCS(0), LoadAvgStart: loadAvg()},
		Started: start.UTC(),
	}
	want := func(r string) bool { return slices.Contains(cfg.Rows, r) }
	if want(RowGen) {
		for _, alg := range cfg.Algs {
			cfg.logf("gen: %s, %d keys and certificates", alg, cfg.GenSamples)
			row, err := measureGen(ctx, alg, cfg.GenSamples)
			if err != nil {
				return nil, err
			}
			rep.Gen = append(rep.Gen, row)
		}
	}
	if want(RowTerminator) {
		r, err := runTerminator(ctx, &cfg)
		if err != nil {
			return nil, err
		}
		rep.Terminator = r
	}
	rep.Machine.LoadAvgEnd = loadAvg()
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// loadAvg returns the 1-minute load average, or 0 where /proc/loadavg is
// missing.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscanf(string(b), "%g", &l)
	return l
}
