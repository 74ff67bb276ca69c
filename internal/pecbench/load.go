package pecbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// Target is a server the load generator drives: the cloud or the echo.
type Target struct {
	Name string
	// Addr is the QUIC (UDP) or TCP address, as Transport says.
	Addr      string
	Transport string // pecwire.QUIC or pecwire.TCP
	Pin       [32]byte
}

// Load is one throughput measurement's shape.
type Load struct {
	Sessions int           // concurrent client sessions
	Window   int           // submissions in flight per session
	Warmup   time.Duration // run before counting
	Duration time.Duration // counted
	// The submission every connection sends.
	ServerName string
	Port       int
	Chain      [][]byte
	// Chains, when set, replace Chain: each session's submissions take
	// them in turn, from a different starting point per session, so the
	// cloud sees a stream of different leaves.
	Chains   [][][]byte
	Requests []pkie.Request
	Budget   time.Duration
}

// Throughput is one load run against one target.
type Throughput struct {
	Name      string  `json:"name"`
	Transport string  `json:"transport"`
	Sessions  int     `json:"sessions"`
	Window    int     `json:"window"`
	Seconds   float64 `json:"seconds"`
	// Proved counts connections whose every requested proof arrived with
	// status ok within the counted window.
	Proved    uint64  `json:"proved"`
	PerSecond float64 `json:"per_second"`
	// P50ms and P99ms are from Submit sent to the last proof received.
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	// NotOK counts connections with some outcome other than ok (busy,
	// failed, timeout, unsupported) or rejected as a whole; Busy the
	// busy ones among them.
	NotOK uint64 `json:"not_ok"`
	Busy  uint64 `json:"busy"`
	// SessionErrors counts sessions that ended early.
	SessionErrors int    `json:"session_errors"`
	FirstError    string `json:"first_error,omitempty"`
	// CPUSeconds is the CPU time this process (the load generator and the
	// server under test together) used in the counted window, and
	// CPUCores that over the window's length: on a shared machine, how
	// much of it the run actually had. PerCPUSecond is Proved over
	// CPUSeconds.
	CPUSeconds   float64 `json:"cpu_seconds"`
	CPUCores     float64 `json:"cpu_cores"`
	PerCPUSecond float64 `json:"per_cpu_second"`
	// SubmitBytes is one Submit frame; ProofBytes the Proof frames that
	// answer it, together.
	SubmitBytes int `json:"submit_bytes"`
	ProofBytes  int `json:"proof_bytes"`
}

// dialSession opens and registers one session.
func dialSession(ctx context.Context, t Target, qc *quic.Config) (*pecwire.Conn, *pecwire.Registered, error) {
	tc := pecwire.ClientTLS(t.Pin)
	var c *pecwire.Conn
	var err error
	switch t.Transport {
	case pecwire.QUIC:
		c, err = pecwire.DialQUIC(ctx, t.Addr, tc, qc)
	case pecwire.TCP:
		c, err = pecwire.DialTCP(ctx, t.Addr, tc)
	default:
		return nil, nil, fmt.Errorf("pecbench: unknown transport %q", t.Transport)
	}
	if err != nil {
		return nil, nil, err
	}
	deadline, _ := ctx.Deadline()
	if err := c.Send(&pecwire.Register{Version: pecwire.Version}, deadline); err != nil {
		c.Close()
		return nil, nil, err
	}
	m, err := c.Recv(deadline)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("pecbench: register with %s: %w", t.Name, err)
	}
	reg, ok := m.(*pecwire.Registered)
	if !ok {
		c.Close()
		return nil, nil, fmt.Errorf("pecbench: register with %s: answered %T", t.Name, m)
	}
	return c, reg, nil
}

// clientQUIC is the QUIC configuration of the load generator's sessions:
// windows large enough that flow control never limits a session's window
// of submissions.
func clientQUIC() *quic.Config {
	return &quic.Config{HandshakeIdleTimeout: 10 * time.Second, MaxIdleTimeout: 30 * time.Second,
		InitialStreamReceiveWindow: 1 << 20, InitialConnectionReceiveWindow: 1 << 20}
}

// RunLoad drives t with l and measures connections proved per second.
func RunLoad(ctx context.Context, t Target, l Load) (*Throughput, error) {
	if l.Sessions < 1 || l.Window < 1 || l.Duration <= 0 || len(l.Requests) == 0 {
		return nil, errors.New("pecbench: a load needs sessions, a window, a duration and requests")
	}
	if l.Budget <= 0 {
		l.Budget = 5 * time.Second
	}
	res := &Throughput{Name: t.Name, Transport: t.Transport, Sessions: l.Sessions, Window: l.Window}
	sub := &pecwire.Submit{ServerName: l.ServerName, Port: uint16(l.Port), Requests: l.Requests, Chain: l.Chain, Budget: l.Budget}
	if len(l.Chains) > 0 {
		sub.Chain = l.Chains[0] // the size reported; submissions take each in turn
	}
	if b, err := pecwire.Marshal(sub); err == nil {
		res.SubmitBytes = len(b)
	} else {
		return nil, err
	}

	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conns := make([]*pecwire.Conn, l.Sessions)
	regs := make([]*pecwire.Registered, l.Sessions)
	var derr error
	var dmu sync.Mutex
	var wg sync.WaitGroup
	// Dial a few at a time: the handshakes are not what is measured.
	sem := make(chan struct{}, 16)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, r, err := dialSession(dctx, t, clientQUIC())
			dmu.Lock()
			defer dmu.Unlock()
			if err != nil {
				derr = errors.Join(derr, err)
				return
			}
			conns[i], regs[i] = c, r
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if derr != nil {
		return nil, fmt.Errorf("pecbench: opening %d sessions to %s: %w", l.Sessions, t.Name, derr)
	}

	start := time.Now()
	countFrom := start.Add(l.Warmup)
	end := countFrom.Add(l.Duration)
	var proved, notOK, busy, proofBytes, sized atomic.Uint64
	var lmu sync.Mutex
	var lat []time.Duration
	var serr []error
	cpu := make(chan float64, 1)
	go func() {
		time.Sleep(time.Until(countFrom))
		a := processCPU()
		time.Sleep(time.Until(end))
		cpu <- processCPU() - a
	}()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls, err := runSession(ctx, conns[i], regs[i], uint32(i), sub, l, countFrom, end, &proved, &notOK, &busy, &proofBytes, &sized)
			lmu.Lock()
			defer lmu.Unlock()
			lat = append(lat, ls...)
			if err != nil {
				serr = append(serr, err)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.Seconds = l.Duration.Seconds()
	res.CPUSeconds = <-cpu
	res.CPUCores = res.CPUSeconds / res.Seconds
	res.Proved, res.NotOK, res.Busy = proved.Load(), notOK.Load(), busy.Load()
	res.PerSecond = float64(res.Proved) / res.Seconds
	res.SessionErrors = len(serr)
	if len(serr) > 0 {
		res.FirstError = serr[0].Error()
	}
	if n := sized.Load(); n > 0 {
		res.ProofBytes = int(proofBytes.Load() / n)
	}
	res.P50ms, res.P99ms = quantileMS(lat, 0.50), quantileMS(lat, 0.99)
	if res.CPUSeconds > 0 {
		res.PerCPUSecond = float64(res.Proved) / res.CPUSeconds
	}
	return res, nil
}

// runSession keeps l.Window submissions in flight on c until end, counting
// the connections completed in [countFrom, end).
func runSession(ctx context.Context, c *pecwire.Conn, reg *pecwire.Registered, session uint32, tmpl *pecwire.Submit, l Load,
	countFrom, end time.Time, proved, notOK, busy, proofBytes, sized *atomic.Uint64) ([]time.Duration, error) {
	// The answers' sizes are taken from the first few connections of each
	// session only: re-encoding every frame to measure it would spend the
	// generator's CPU, which the server under test shares.
	const sizeSamples = 8
	sampled := 0
	type pending struct {
		sent  time.Time
		left  int
		ok    bool
		busy  bool
		bytes int
	}
	var (
		mu       sync.Mutex
		inflight = map[pecwire.Nonce]*pending{}
		stopping bool
		lat      []time.Duration
	)
	tokens := make(chan struct{}, l.Window)
	for range l.Window {
		tokens <- struct{}{}
	}
	drained := make(chan struct{}, 1)
	rerr := make(chan error, 1)
	readerDone := make(chan struct{})

	// Reader: match outcomes to submissions and free a window slot per
	// completed connection.
	go func() {
		defer close(readerDone)
		for {
			m, err := c.Recv(time.Time{})
			if err != nil {
				rerr <- err
				return
			}
			now := time.Now()
			var n pecwire.Nonce
			var status pecwire.ProofStatus
			whole := false
			size := 0
			switch m := m.(type) {
			case *pecwire.Proof:
				n, status = m.Nonce, m.Status
				if sampled < sizeSamples {
					if b, err := pecwire.Marshal(m); err == nil {
						size = len(b)
					}
				}
			case *pecwire.Reject:
				n, whole = m.Nonce, true
				status = pecwire.ProofFailed
				if m.Code == pecwire.RejectBusy {
					status = pecwire.ProofBusy
				}
			case *pecwire.Error:
				rerr <- m
				return
			default: // Pong
				continue
			}
			mu.Lock()
			p := inflight[n]
			if p == nil {
				mu.Unlock()
				continue
			}
			p.bytes += size
			p.ok = p.ok && status == pecwire.ProofOK
			p.busy = p.busy || status == pecwire.ProofBusy
			if p.left--; whole {
				p.left = 0
			}
			if p.left > 0 {
				mu.Unlock()
				continue
			}
			delete(inflight, n)
			if !p.sent.Before(countFrom) && now.Before(end) {
				if sampled < sizeSamples && p.ok {
					sampled++
					sized.Add(1)
					proofBytes.Add(uint64(p.bytes))
				}
				switch {
				case p.ok:
					proved.Add(1)
					lat = append(lat, now.Sub(p.sent))
				default:
					notOK.Add(1)
					if p.busy {
						busy.Add(1)
					}
				}
			}
			if stopping && len(inflight) == 0 {
				select {
				case drained <- struct{}{}:
				default:
				}
			}
			mu.Unlock()
			select {
			case tokens <- struct{}{}:
			default:
			}
		}
	}()

	var seq uint32
	var pingSeq uint64
	ping := time.NewTicker(max(reg.Keepalive/2, time.Second))
	defer ping.Stop()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		case err = <-rerr:
			break loop
		case <-ping.C:
			pingSeq++
			if err = c.Send(&pecwire.Ping{Seq: pingSeq}, time.Now().Add(10*time.Second)); err != nil {
				break loop
			}
		case <-tokens:
			now := time.Now()
			if !now.Before(end) {
				break loop
			}
			seq++
			s := *tmpl
			if len(l.Chains) > 0 {
				s.Chain = l.Chains[(int(session)*7919+int(seq))%len(l.Chains)]
			}
			s.ClientID = reg.ClientID
			binary.BigEndian.PutUint32(s.Nonce[:4], session)
			binary.BigEndian.PutUint32(s.Nonce[4:], seq)
			mu.Lock()
			inflight[s.Nonce] = &pending{sent: now, left: len(s.Requests), ok: true}
			mu.Unlock()
			if err = c.Send(&s, now.Add(10*time.Second)); err != nil {
				break loop
			}
		}
	}
	if err == nil {
		// Past the end: let what is in flight finish, within the budget.
		mu.Lock()
		stopping = true
		left := len(inflight)
		mu.Unlock()
		if left > 0 {
			select {
			case <-drained:
			case err = <-rerr:
			case <-time.After(l.Budget + 5*time.Second):
				err = fmt.Errorf("pecbench: %d submissions unanswered after the budget", left)
			}
		}
	}
	c.Close()
	<-readerDone
	return lat, err
}

func quantileMS(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q * float64(len(s)))
	if i >= len(s) {
		i = len(s) - 1
	}
	return float64(s[i].Nanoseconds()) / 1e6
}

// processCPU returns the user and system CPU seconds this process has used.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
