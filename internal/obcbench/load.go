package obcbench

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The backend's response distributions. The paper's backend "varies both
// response delays … as well as response sizes according to a real-world
// distribution" without publishing it; these are log-normal, a common fit
// for both: delay median 20 ms (σ 1: p90 72 ms, p99 205 ms, capped at 1 s),
// size median 8 KiB (σ 1.2: p90 38 KiB, p99 132 KiB, capped at 256 KiB).
const (
	DelayMedian = 20 * time.Millisecond
	DelaySigma  = 1.0
	DelayCap    = time.Second
	SizeMedian  = 8 << 10
	SizeSigma   = 1.2
	SizeCap     = 256 << 10
)

// Distributions describes the backend's response distributions (for the
// report).
const Distributions = "delay log-normal median 20 ms σ 1 (cap 1 s); size log-normal median 8 KiB σ 1.2 (cap 256 KiB)"

// Paper's Figures 9 and 10 (Origin-Bound Certificates, USENIX Security
// 2012, §6.2): the terminator's memory (GB) and CPU (cores) at 3,000
// requests/s, read from the figures' bar labels (no client certificate,
// ECDSA on sect163k1, RSA-1024, RSA-2048).
var (
	paperMemGB    = map[string]float64{"none": 1.855, "ecdsa-p256": 1.873, "rsa-1024": 1.865, "rsa-2048": 2.082}
	paperCPUCores = map[string]float64{"none": 4.31, "ecdsa-p256": 4.61, "rsa-1024": 4.43, "rsa-2048": 4.40}
)

// HistogramEdgesMs are the upper bounds of the latency histogram's bins;
// a last bin holds the rest.
var HistogramEdgesMs = []float64{0.25, 0.5, 1, 2, 5, 10, 20, 50, 100}

// TerminatorRow is the TLS-terminator experiment (Figures 9–14).
type TerminatorRow struct {
	Rate     float64 `json:"rate"`
	Seconds  float64 `json:"seconds"`
	Warmup   float64 `json:"warmup_seconds"`
	Resumed  float64 `json:"resumed_share"`
	Clients  int     `json:"clients"`
	Backend  string  `json:"backend"`
	Separate bool    `json:"separate_process"`
	// Ceiling is raw TLS handshakes without client certificates against
	// the same terminator, closed loop, in the same run.
	Ceiling Ceiling          `json:"ceiling"`
	Cases   []TerminatorCase `json:"cases"`
}

// Ceiling is a closed-loop run of full handshakes.
type Ceiling struct {
	Seconds       float64 `json:"seconds"`
	Workers       int     `json:"workers"`
	PerSecond     float64 `json:"handshakes_per_second"`
	TerminatorCPU float64 `json:"terminator_cpu_cores"`
	// PerCPUSecond is handshakes per second of the terminator's CPU
	// time: what one core would do without the load generator beside
	// it.
	PerCPUSecond float64 `json:"handshakes_per_cpu_second"`
}

// TerminatorCase is one client key's run.
type TerminatorCase struct {
	Case string `json:"case"`
	// Sent is the requests started in the measured window, Skipped those
	// the generator could not start (too many in flight), Errors those
	// that failed at the client.
	Sent    int `json:"sent"`
	Skipped int `json:"skipped"`
	Errors  int `json:"errors"`
	// AchievedRate is requests completed per second in the window.
	AchievedRate float64 `json:"achieved_rate"`
	// Seen are the terminator's own records: requests by client key
	// algorithm, resumed and full handshakes, backend failures.
	Seen         map[string]int `json:"seen_keys"`
	SeenResumed  int            `json:"seen_resumed"`
	SeenFresh    int            `json:"seen_fresh"`
	BackendFails int            `json:"backend_failures"`
	// Memory is the terminator's, averaged over the samples taken each
	// second of the window (and the largest sample).
	RSSMB      float64 `json:"rss_mb"`
	RSSMBMax   float64 `json:"rss_mb_max"`
	HeapMB     float64 `json:"heap_mb"`
	GoMB       float64 `json:"go_mb"`
	MemSamples int     `json:"memory_samples"`
	// CPUCores is the terminator's CPU time over the window divided by
	// the window; LoadGenCores the same for this process (the load
	// generator and the backend).
	CPUCores     float64 `json:"cpu_cores"`
	LoadGenCores float64 `json:"loadgen_cpu_cores"`
	// OverheadMs is the latency the terminator added (inside it: total
	// minus backend time); Histogram counts it in HistogramEdgesMs bins;
	// Under1ms is the share below 1 ms.
	OverheadMs Stats `json:"overhead_ms"`
	// WallMs is the terminator's time without subtracting its waits for
	// the client (the client's handshake computation shows in it).
	WallMs    Stats   `json:"wall_ms"`
	Histogram []int   `json:"histogram"`
	Under1ms  float64 `json:"under_1ms"`
	ClientMs  Stats   `json:"client_ms"`
	// The paper's figures for the case (Figures 9 and 10), or 0.
	PaperMemGB    float64 `json:"paper_mem_gb,omitempty"`
	PaperCPUCores float64 `json:"paper_cpu_cores,omitempty"`

	overhead []float64
}

// terminatorHandle is a terminator in this process or in a child.
type terminatorHandle interface {
	addr() string
	cert() *x509.Certificate
	usage() (Usage, error)
	reset() error
	stats() (TerminatorStats, error)
	close() error
}

type localTerminator struct{ *Terminator }

func (l localTerminator) addr() string                    { return l.Addr }
func (l localTerminator) cert() *x509.Certificate         { return l.Cert }
func (l localTerminator) usage() (Usage, error)           { return SelfUsage(), nil }
func (l localTerminator) reset() error                    { l.Reset(); return nil }
func (l localTerminator) stats() (TerminatorStats, error) { return l.Stats(), nil }
func (l localTerminator) close() error                    { return l.Close() }

type childTerminator struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	ready ChildReady
	c     *x509.Certificate
	mu    sync.Mutex
}

func startChild(ctx context.Context, argv []string, opts TerminatorOptions) (*childTerminator, error) {
	auth := "none"
	if opts.ClientAuth {
		auth = "request"
	}
	args := append(append([]string(nil), argv[1:]...), "--backend", opts.Backend, "--client-auth", auth)
	cmd := exec.CommandContext(ctx, argv[0], args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("obcbench: starting the terminator child: %w", err)
	}
	c := &childTerminator{cmd: cmd, in: in, out: bufio.NewReader(out)}
	line, err := c.out.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &c.ready)
	}
	if err == nil {
		c.c, err = x509.ParseCertificate(c.ready.CertDER)
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("obcbench: terminator child %v: no ready line: %w", argv, err)
	}
	return c, nil
}

func (c *childTerminator) call(cmd string, v any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		return fmt.Errorf("obcbench: terminator child: %w", err)
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("obcbench: terminator child: %s: %w", cmd, err)
	}
	return json.Unmarshal(line, v)
}

func (c *childTerminator) addr() string            { return c.ready.Addr }
func (c *childTerminator) cert() *x509.Certificate { return c.c }
func (c *childTerminator) usage() (Usage, error) {
	var u Usage
	return u, c.call("usage", &u)
}
func (c *childTerminator) reset() error { return c.call("reset", &struct{}{}) }
func (c *childTerminator) stats() (TerminatorStats, error) {
	var s TerminatorStats
	return s, c.call("stats", &s)
}
func (c *childTerminator) close() error {
	c.in.Close() // the child returns when its input ends
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		return <-done
	}
}

func startHandle(ctx context.Context, cfg *Config, opts TerminatorOptions) (terminatorHandle, error) {
	if len(cfg.Exec) > 0 {
		return startChild(ctx, cfg.Exec, opts)
	}
	t, err := StartTerminator(opts)
	if err != nil {
		return nil, err
	}
	return localTerminator{t}, nil
}

// backend answers GET /?d=MICROSECONDS&s=BYTES after d with s bytes.
type backend struct {
	ln  net.Listener
	srv *http.Server
}

func startBackend() (*backend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("obcbench: backend: %w", err)
	}
	body := make([]byte, SizeCap)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	b := &backend{ln: ln}
	b.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, ErrorLog: nullLogger(), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := strconv.Atoi(r.URL.Query().Get("d"))
		s, _ := strconv.Atoi(r.URL.Query().Get("s"))
		s = max(0, min(s, len(body)))
		time.Sleep(time.Duration(d) * time.Microsecond)
		w.Header().Set("Content-Length", strconv.Itoa(s))
		w.Write(body[:s])
	})}
	go b.srv.Serve(ln)
	return b, nil
}

func (b *backend) addr() string { return b.ln.Addr().String() }
func (b *backend) close()       { b.srv.Close() }

// reqSpec is one request of the mix.
type reqSpec struct {
	client int
	fresh  bool
	delay  time.Duration
	size   int
}

// mix draws n requests; every case gets the same mix.
func mix(seed uint64, n, clients int, resumed float64) []reqSpec {
	rng := rand.New(rand.NewPCG(seed, 0x0bc))
	out := make([]reqSpec, n)
	for i := range out {
		d := time.Duration(float64(DelayMedian) * math.Exp(DelaySigma*rng.NormFloat64()))
		s := int(float64(SizeMedian) * math.Exp(SizeSigma*rng.NormFloat64()))
		out[i] = reqSpec{client: rng.IntN(clients), fresh: rng.Float64() >= resumed, delay: min(d, DelayCap), size: min(s, SizeCap)}
	}
	return out
}

// simClient is one simulated client: its key and its session cache.
type simClient struct {
	cert  *tls.Certificate
	mu    sync.Mutex
	cache tls.ClientSessionCache
}

func newClients(n int, alg string) ([]*simClient, error) {
	out := make([]*simClient, n)
	for i := range out {
		c := &simClient{}
		if alg != "none" {
			k, err := newKey(alg)
			if err != nil {
				return nil, err
			}
			der, err := selfSigned(k, int64(i+1))
			if err != nil {
				return nil, err
			}
			c.cert = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
		}
		out[i] = c
	}
	return out, nil
}

type loadResult struct {
	d       time.Duration
	resumed bool
	err     error
}

// request opens a connection (resuming the client's session unless fresh),
// sends one request and reads the whole response.
func request(ctx context.Context, addr string, base *tls.Config, c *simClient, s reqSpec) loadResult {
	start := time.Now()
	cfg := base.Clone()
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c.cert == nil {
			return &tls.Certificate{}, nil
		}
		return c.cert, nil
	}
	c.mu.Lock()
	cache := c.cache
	c.mu.Unlock()
	if s.fresh || cache == nil {
		cache = tls.NewLRUClientSessionCache(4)
		defer func() {
			c.mu.Lock()
			c.cache = cache
			c.mu.Unlock()
		}()
	}
	cfg.ClientSessionCache = cache
	d := net.Dialer{Timeout: 10 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return loadResult{err: err}
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		return loadResult{err: err}
	}
	if _, err := fmt.Fprintf(conn, "GET /?d=%d&s=%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", s.delay.Microseconds(), s.size, TerminatorName); err != nil {
		return loadResult{err: err}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return loadResult{err: err}
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && (resp.StatusCode != http.StatusOK || n != int64(s.size)) {
		err = fmt.Errorf("status %d, %d of %d bytes", resp.StatusCode, n, s.size)
	}
	return loadResult{d: time.Since(start), resumed: conn.ConnectionState().DidResume, err: err}
}

// maxInFlight bounds the generator's open requests; beyond it a request
// is skipped (counted), so an overloaded terminator shows as skips rather
// than as an ever-growing queue in the generator.
const maxInFlight = 4096

func runTerminator(ctx context.Context, cfg *Config) (*TerminatorRow, error) {
	b, err := startBackend()
	if err != nil {
		return nil, err
	}
	defer b.close()
	row := &TerminatorRow{Rate: cfg.Rate, Seconds: cfg.Duration.Seconds(), Warmup: cfg.Warmup.Seconds(), Resumed: cfg.Resumed,
		Clients: cfg.Clients, Backend: Distributions, Separate: len(cfg.Exec) > 0}
	cfg.logf("terminator: ceiling, %v of full handshakes without client certificates", cfg.CeilingDuration)
	if row.Ceiling, err = ceiling(ctx, cfg, b.addr()); err != nil {
		return nil, err
	}
	cfg.logf("terminator: ceiling %.0f handshakes/s (%.0f per terminator CPU second)", row.Ceiling.PerSecond, row.Ceiling.PerCPUSecond)
	n := int(cfg.Rate * (cfg.Warmup + cfg.Duration).Seconds())
	specs := mix(cfg.Seed, n, cfg.Clients, cfg.Resumed)
	for _, cs := range cfg.Cases {
		cfg.logf("terminator: %s: %.0f requests/s for %v (+%v warm-up)", cs, cfg.Rate, cfg.Duration, cfg.Warmup)
		c, err := runCase(ctx, cfg, b.addr(), cs, specs)
		if err != nil {
			return nil, fmt.Errorf("obcbench: terminator case %s: %w", cs, err)
		}
		cfg.logf("terminator: %s: %.0f requests/s done, %d errors, CPU %.3f cores, RSS %.1f MB, added latency p50 %.2f ms",
			cs, c.AchievedRate, c.Errors, c.CPUCores, c.RSSMB, c.OverheadMs.P50)
		row.Cases = append(row.Cases, c)
	}
	return row, nil
}

func clientBase(h terminatorHandle) *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(h.cert())
	return &tls.Config{ServerName: TerminatorName, RootCAs: roots}
}

func ceiling(ctx context.Context, cfg *Config, backendAddr string) (Ceiling, error) {
	h, err := startHandle(ctx, cfg, TerminatorOptions{Backend: backendAddr})
	if err != nil {
		return Ceiling{}, err
	}
	defer h.close()
	base := clientBase(h)
	workers := 4
	var count atomic.Int64
	var firstErr atomic.Value
	u0, err := h.usage()
	if err != nil {
		return Ceiling{}, err
	}
	start := time.Now()
	deadline := start.Add(cfg.CeilingDuration)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", h.addr(), base)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				conn.Close()
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	u1, err := h.usage()
	if err != nil {
		return Ceiling{}, err
	}
	if count.Load() == 0 {
		return Ceiling{}, fmt.Errorf("obcbench: ceiling: no handshake completed: %v", firstErr.Load())
	}
	c := Ceiling{Seconds: el, Workers: workers, PerSecond: float64(count.Load()) / el}
	c.TerminatorCPU = (u1.CPUSeconds - u0.CPUSeconds) / u1.At.Sub(u0.At).Seconds()
	if cpu := u1.CPUSeconds - u0.CPUSeconds; cpu > 0 {
		c.PerCPUSecond = float64(count.Load()) / cpu
	}
	return c, nil
}

func runCase(ctx context.Context, cfg *Config, backendAddr, cs string, specs []reqSpec) (TerminatorCase, error) {
	out := TerminatorCase{Case: cs, PaperMemGB: paperMemGB[cs], PaperCPUCores: paperCPUCores[cs]}
	clients, err := newClients(cfg.Clients, cs)
	if err != nil {
		return out, err
	}
	h, err := startHandle(ctx, cfg, TerminatorOptions{Backend: backendAddr, ClientAuth: cs != "none"})
	if err != nil {
		return out, err
	}
	defer h.close()
	base := clientBase(h)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	interval := time.Duration(float64(time.Second) / cfg.Rate)
	warmN := int(cfg.Rate * cfg.Warmup.Seconds())
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inFlight atomic.Int64
		clientMs []float64
	)
	var u0, own0, u1, own1 Usage
	var mem []Usage
	var sampleErr error
	stopSampling := make(chan struct{})
	samplingDone := make(chan struct{})
	start := time.Now()
	for i, s := range specs {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if i == warmN {
			if err := h.reset(); err != nil {
				return out, err
			}
			if u0, err = h.usage(); err != nil {
				return out, err
			}
			own0 = SelfUsage()
			go func() {
				defer close(samplingDone)
				tk := time.NewTicker(time.Second)
				defer tk.Stop()
				for {
					select {
					case <-stopSampling:
						return
					case <-tk.C:
						u, err := h.usage()
						if err != nil {
							sampleErr = err
							return
						}
						mem = append(mem, u)
					}
				}
			}()
		}
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		counted := i >= warmN
		if inFlight.Load() >= maxInFlight {
			if counted {
				out.Skipped++
			}
			continue
		}
		if counted {
			out.Sent++
		}
		inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inFlight.Add(-1)
			r := request(ctx, h.addr(), base, clients[s.client], s)
			if !counted {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if r.err != nil {
				out.Errors++
				return
			}
			clientMs = append(clientMs, ms(r.d))
		}()
	}
	if warmN >= len(specs) {
		return out, errors.New("no request in the measured window (rate × duration too small)")
	}
	// The window ends one interval after the last request's start.
	if w := time.Until(start.Add(time.Duration(len(specs)) * interval)); w > 0 {
		time.Sleep(w)
	}
	close(stopSampling)
	<-samplingDone
	if sampleErr != nil {
		return out, sampleErr
	}
	if u1, err = h.usage(); err != nil {
		return out, err
	}
	own1 = SelfUsage()
	wg.Wait()
	st, err := h.stats()
	if err != nil {
		return out, err
	}
	window := u1.At.Sub(u0.At).Seconds()
	out.CPUCores = (u1.CPUSeconds - u0.CPUSeconds) / window
	out.LoadGenCores = (own1.CPUSeconds - own0.CPUSeconds) / own1.At.Sub(own0.At).Seconds()
	if len(specs)-warmN > 0 {
		mem = append(mem, u1)
	}
	for _, u := range mem {
		out.RSSMB += float64(u.RSSBytes) / 1e6
		out.HeapMB += float64(u.HeapBytes) / 1e6
		out.GoMB += float64(u.GoBytes) / 1e6
		out.RSSMBMax = max(out.RSSMBMax, float64(u.RSSBytes)/1e6)
	}
	out.MemSamples = len(mem)
	out.RSSMB /= float64(len(mem))
	out.HeapMB /= float64(len(mem))
	out.GoMB /= float64(len(mem))
	out.Seen, out.SeenResumed, out.SeenFresh, out.BackendFails = st.Keys, st.Resumed, st.Fresh, st.Failed
	out.overhead = make([]float64, len(st.OverheadMs))
	for i, v := range st.OverheadMs {
		out.overhead[i] = float64(v)
	}
	out.OverheadMs = summarize(out.overhead)
	wall := make([]float64, len(st.WallMs))
	for i, v := range st.WallMs {
		wall[i] = float64(v)
	}
	out.WallMs = summarize(wall)
	out.Histogram = histogram(out.overhead, HistogramEdgesMs)
	if len(out.overhead) > 0 {
		under := 0
		for _, v := range out.overhead {
			if v < 1 {
				under++
			}
		}
		out.Under1ms = float64(under) / float64(len(out.overhead))
	}
	out.ClientMs = summarize(clientMs)
	out.AchievedRate = float64(len(clientMs)) / cfg.Duration.Seconds()
	return out, nil
}

// histogram counts v in bins ending at edges, plus one for the rest.
func histogram(v, edges []float64) []int {
	h := make([]int, len(edges)+1)
	for _, x := range v {
		i := 0
		for i < len(edges) && x >= edges[i] {
			i++
		}
		h[i]++
	}
	return h
}
