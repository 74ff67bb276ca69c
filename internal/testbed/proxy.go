package testbed

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Distances Forced Perspectives measured notaries at: a continental set (US
// notaries, a US client) and a global one (EC2 sites on five continents).
const (
	ContinentalRTT = 50 * time.Millisecond
	GlobalRTT      = 150 * time.Millisecond
)

// DelayProxy is a TCP relay that adds a fixed one-way delay of RTT/2 to every
// byte in each direction, placing whatever is behind it at a network
// distance. It stands in for netem, which these machines lack. The TCP
// handshake with the proxy itself is not delayed (the kernel completes it
// before the proxy sees the connection), so a TCP connect through it costs
// nothing; everything after that costs what the RTT says.
type DelayProxy struct {
	Addr netip.AddrPort
	RTT  time.Duration

	upstream string
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// StartDelayProxy listens on loopback and relays to upstream with rtt added.
func StartDelayProxy(upstream string, rtt time.Duration) (*DelayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testbed: delay proxy: %w", err)
	}
	p := &DelayProxy{Addr: ln.Addr().(*net.TCPAddr).AddrPort(), RTT: rtt, upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *DelayProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.relay(c)
		}()
	}
}

func (p *DelayProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *DelayProxy) relay(c net.Conn) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	p.track(c, true)
	p.track(up, true)
	defer p.track(c, false)
	defer p.track(up, false)
	oneWay := p.RTT / 2
	done := make(chan struct{}, 2)
	go func() { delayCopy(up, c, oneWay); done <- struct{}{} }()
	go func() { delayCopy(c, up, oneWay); done <- struct{}{} }()
	<-done
	<-done
}

type chunk struct {
	b   []byte
	due time.Time
}

// delayCopy reads from src and writes each chunk to dst d after it was read,
// preserving order, so bandwidth is not limited but latency is added.
func delayCopy(dst, src net.Conn, d time.Duration) {
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{buf[:n], time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for ch := range q {
		if failed {
			continue // drain so the reader can finish
		}
		if w := time.Until(ch.due); w > 0 {
			time.Sleep(w)
		}
		if _, err := dst.Write(ch.b); err != nil {
			failed = true
			src.Close()
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && !failed {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
}

// Close stops the proxy and every relayed connection.
func (p *DelayProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
