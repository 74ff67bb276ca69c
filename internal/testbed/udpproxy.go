package testbed

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// UDPProxyConfig configures a UDPProxy.
type UDPProxyConfig struct {
	// Delay is added to every datagram in each direction, so the path
	// through the proxy costs 2×Delay more per round trip.
	Delay time.Duration
	// FlowDelay, when set, replaces Delay with a delay per client flow:
	// it is called once, when a flow opens, with the client's address and
	// the flow's rank (0 for the first flow the proxy sees, 1 for the
	// next, …). Two parties in one process reaching the same server
	// address from different emulated places (a client and a PEC server
	// forwarding to the client's cloud) then cross different distances.
	// Each flow has its own queues, so a far flow never holds up a near
	// one.
	FlowDelay func(client netip.AddrPort, rank int) time.Duration
	// LossToServer and LossToClient are the fractions, in [0, 1], of
	// datagrams dropped on the way to the server and back to the client.
	LossToServer, LossToClient float64
	// Seed seeds the loss draws (math/rand/v2 PCG, one stream per
	// direction), so a run that sends the same datagrams in the same order
	// loses the same ones.
	Seed uint64
	// IdleTimeout is how long a client's flow outlives its last datagram
	// before its upstream socket is closed (zero: two minutes).
	IdleTimeout time.Duration
	// MaxFlows bounds the client 4-tuples relayed at once; datagrams from
	// further clients are dropped (zero: 4096).
	MaxFlows int
	// QueueLen bounds the datagrams held for delay in each direction;
	// beyond it they are dropped, as a router's full buffer drops them
	// (zero: 8192).
	QueueLen int
}

// UDPDirStats counts one direction's datagrams. Once the proxy is quiet,
// Received = Forwarded + Dropped.
type UDPDirStats struct {
	Received  uint64 // datagrams the proxy read in this direction
	Forwarded uint64 // datagrams it wrote on
	Dropped   uint64 // datagrams it did not: lost by draw, blocked, or over a bound
	Blocked   uint64 // of Dropped, those dropped because UDP was blocked
}

// UDPStats counts both directions.
type UDPStats struct {
	ToServer, ToClient UDPDirStats
}

// UDPProxy relays UDP datagrams between clients and one server address,
// adding delay and dropping a chosen fraction each way: the datagram
// counterpart of DelayProxy, standing in for netem. Each client 4-tuple gets
// its own upstream socket, so the server sees one peer per client and
// connection-oriented protocols over UDP (QUIC) work through it. Block
// drops everything, which is what a network that blocks UDP does: no
// answer, no ICMP.
type UDPProxy struct {
	// Addr is where clients send.
	Addr netip.AddrPort

	upstream *net.UDPAddr
	cfg      UDPProxyConfig
	ln       *net.UDPConn

	blocked      atomic.Bool
	lossToServer atomic.Uint64 // math.Float64bits
	lossToClient atomic.Uint64
	toServer     dirState
	toClient     dirState

	mu     sync.Mutex
	flows  map[netip.AddrPort]*udpFlow
	nflows int // flows ever opened: the next one's rank
	closed bool

	done chan struct{}
	wg   sync.WaitGroup
}

type dirState struct {
	received, forwarded, dropped, blocked atomic.Uint64

	rmu sync.Mutex
	rng *rand.Rand
	q   chan delayed
}

type delayed struct {
	b    []byte
	due  time.Time
	flow *udpFlow
}

type udpFlow struct {
	client netip.AddrPort
	up     *net.UDPConn
	last   atomic.Int64 // unix nanoseconds of the last datagram either way
	// With FlowDelay: the flow's delay and its own queues to the server
	// and to the client, and gone, closed when the flow expires.
	delay time.Duration
	q     [2]chan delayed
	gone  chan struct{}
}

// StartUDPProxy listens on a loopback UDP port and relays to upstream
// (host:port) as cfg says.
func StartUDPProxy(upstream string, cfg UDPProxyConfig) (*UDPProxy, error) {
	ua, err := net.ResolveUDPAddr("udp", upstream)
	if err != nil {
		return nil, fmt.Errorf("testbed: udp proxy: upstream: %w", err)
	}
	for _, l := range []float64{cfg.LossToServer, cfg.LossToClient} {
		if !(l >= 0 && l <= 1) {
			return nil, fmt.Errorf("testbed: udp proxy: loss %v outside [0, 1]", l)
		}
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.MaxFlows <= 0 {
		cfg.MaxFlows = 4096
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 8192
	}
	network := "udp4"
	lo := "127.0.0.1:0"
	if ua.IP.To4() == nil && ua.IP != nil {
		network, lo = "udp6", "[::1]:0"
	}
	la, err := net.ResolveUDPAddr(network, lo)
	if err != nil {
		return nil, fmt.Errorf("testbed: udp proxy: %w", err)
	}
	ln, err := net.ListenUDP(network, la)
	if err != nil {
		return nil, fmt.Errorf("testbed: udp proxy: %w", err)
	}
	p := &UDPProxy{
		Addr:     ln.LocalAddr().(*net.UDPAddr).AddrPort(),
		upstream: ua,
		cfg:      cfg,
		ln:       ln,
		flows:    map[netip.AddrPort]*udpFlow{},
		done:     make(chan struct{}),
	}
	p.lossToServer.Store(math.Float64bits(cfg.LossToServer))
	p.lossToClient.Store(math.Float64bits(cfg.LossToClient))
	// Distinct streams per direction, so how many datagrams flow one way
	// does not change which are lost the other way.
	p.toServer.rng = rand.New(rand.NewPCG(cfg.Seed, 0x746f736572766572))
	p.toClient.rng = rand.New(rand.NewPCG(cfg.Seed, 0x746f636c69656e74))
	if cfg.Delay > 0 {
		p.toServer.q = make(chan delayed, cfg.QueueLen)
		p.toClient.q = make(chan delayed, cfg.QueueLen)
		p.wg.Add(2)
		go p.deliver(p.toServer.q, true, nil)
		go p.deliver(p.toClient.q, false, nil)
	}
	p.wg.Add(2)
	go p.readClients()
	go p.expire()
	return p, nil
}

// Block switches UDP blocking on or off. While on, every datagram either
// way is dropped silently, those already in flight included.
func (p *UDPProxy) Block(on bool) { p.blocked.Store(on) }

// SetLoss changes the loss fractions (each clamped to [0, 1]) for the
// datagrams that arrive from now on.
func (p *UDPProxy) SetLoss(toServer, toClient float64) {
	p.lossToServer.Store(math.Float64bits(clamp01(toServer)))
	p.lossToClient.Store(math.Float64bits(clamp01(toClient)))
}

func clamp01(f float64) float64 {
	if !(f > 0) {
		return 0
	}
	return min(f, 1)
}

// Stats returns the counters so far.
func (p *UDPProxy) Stats() UDPStats {
	return UDPStats{ToServer: p.toServer.stats(), ToClient: p.toClient.stats()}
}

func (d *dirState) stats() UDPDirStats {
	// Forwarded and dropped first, received last: a datagram counted in
	// either has been received, so a reader never sees more out than in.
	s := UDPDirStats{Forwarded: d.forwarded.Load(), Dropped: d.dropped.Load(), Blocked: d.blocked.Load()}
	s.Received = d.received.Load()
	return s
}

// Flows returns the number of client 4-tuples currently relayed.
func (p *UDPProxy) Flows() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.flows)
}

// Close stops the proxy, closes every upstream socket and waits for its
// goroutines. Datagrams still held for delay are discarded and counted as
// dropped, so the counters add up afterwards.
func (p *UDPProxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	err := p.ln.Close()
	for _, f := range p.flows {
		f.up.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	for _, d := range []*dirState{&p.toServer, &p.toClient} {
		for len(d.q) > 0 {
			<-d.q
			d.dropped.Add(1)
		}
	}
	for _, f := range p.flows {
		for i, d := range []*dirState{&p.toServer, &p.toClient} {
			for len(f.q[i]) > 0 {
				<-f.q[i]
				d.dropped.Add(1)
			}
		}
	}
	return err
}

// pass decides one datagram's fate: false if it is dropped (and counted).
func (p *UDPProxy) pass(d *dirState, loss *atomic.Uint64) bool {
	d.received.Add(1)
	if p.blocked.Load() {
		d.dropped.Add(1)
		d.blocked.Add(1)
		return false
	}
	if l := math.Float64frombits(loss.Load()); l > 0 {
		d.rmu.Lock()
		lost := d.rng.Float64() < l
		d.rmu.Unlock()
		if lost {
			d.dropped.Add(1)
			return false
		}
	}
	return true
}

func (p *UDPProxy) readClients() {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := p.ln.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // transient (ICMP reflected onto the socket): keep relaying
		}
		if !p.pass(&p.toServer, &p.lossToServer) {
			continue
		}
		f := p.flow(from)
		if f == nil {
			p.toServer.dropped.Add(1)
			continue
		}
		f.last.Store(time.Now().UnixNano())
		p.send(&p.toServer, f, buf[:n], true)
	}
}

// send forwards b now or queues it for its delay. b is copied if queued.
func (p *UDPProxy) send(d *dirState, f *udpFlow, b []byte, toServer bool) {
	delay, q := p.cfg.Delay, d.q
	if p.cfg.FlowDelay != nil {
		delay, q = f.delay, f.q[0]
		if !toServer {
			q = f.q[1]
		}
	}
	if delay <= 0 {
		p.write(d, f, b, toServer)
		return
	}
	it := delayed{b: append([]byte(nil), b...), due: time.Now().Add(delay), flow: f}
	select {
	case q <- it:
	default:
		d.dropped.Add(1)
	}
}

func (p *UDPProxy) write(d *dirState, f *udpFlow, b []byte, toServer bool) {
	var err error
	if toServer {
		_, err = f.up.Write(b)
	} else {
		_, err = p.ln.WriteToUDPAddrPort(b, f.client)
	}
	if err != nil {
		d.dropped.Add(1)
		return
	}
	d.forwarded.Add(1)
}

// deliver writes queued datagrams when they are due. The delay is the same
// for all, so the queue is in due order and datagrams are not reordered.
// It returns when the proxy closes or gone (nil: never) is closed.
func (p *UDPProxy) deliver(q chan delayed, toServer bool, gone <-chan struct{}) {
	defer p.wg.Done()
	d := &p.toClient
	if toServer {
		d = &p.toServer
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var it delayed
		select {
		case it = <-q:
		case <-p.done:
			return
		case <-gone:
			return
		}
		if w := time.Until(it.due); w > 0 {
			t.Reset(w)
			select {
			case <-t.C:
			case <-p.done:
				d.dropped.Add(1) // it, taken from the queue, is discarded too
				return
			case <-gone:
				d.dropped.Add(1)
				return
			}
		}
		// Blocking applies to what is still in flight, as a firewall rule
		// applies to packets not yet past it.
		if p.blocked.Load() {
			d.dropped.Add(1)
			d.blocked.Add(1)
			continue
		}
		p.write(d, it.flow, it.b, toServer)
	}
}

// flow returns the flow of a client 4-tuple, opening its upstream socket
// on the first datagram; nil when the bound on flows is reached or the
// proxy is closed.
func (p *UDPProxy) flow(client netip.AddrPort) *udpFlow {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.flows[client]; ok {
		return f
	}
	if p.closed || len(p.flows) >= p.cfg.MaxFlows {
		return nil
	}
	up, err := net.DialUDP(p.upstream.Network(), nil, p.upstream)
	if err != nil {
		return nil
	}
	f := &udpFlow{client: client, up: up}
	f.last.Store(time.Now().UnixNano())
	p.flows[client] = f
	if p.cfg.FlowDelay != nil {
		f.delay = p.cfg.FlowDelay(client, p.nflows)
		if f.delay > 0 {
			f.q = [2]chan delayed{make(chan delayed, p.cfg.QueueLen), make(chan delayed, p.cfg.QueueLen)}
			f.gone = make(chan struct{})
			p.wg.Add(2)
			go p.deliver(f.q[0], true, f.gone)
			go p.deliver(f.q[1], false, f.gone)
		}
	}
	p.nflows++
	p.wg.Add(1)
	go p.readServer(f)
	return f
}

func (p *UDPProxy) readServer(f *udpFlow) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := f.up.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A connected UDP socket reports the server's port
			// unreachable as a read error; the server may come back.
			continue
		}
		if !p.pass(&p.toClient, &p.lossToClient) {
			continue
		}
		f.last.Store(time.Now().UnixNano())
		p.send(&p.toClient, f, buf[:n], false)
	}
}

// expire closes flows idle past IdleTimeout, so a long run with many
// short-lived clients does not hold a socket per client forever.
func (p *UDPProxy) expire() {
	defer p.wg.Done()
	tick := time.NewTicker(max(p.cfg.IdleTimeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case now := <-tick.C:
			cutoff := now.Add(-p.cfg.IdleTimeout).UnixNano()
			p.mu.Lock()
			for k, f := range p.flows {
				if f.last.Load() < cutoff {
					f.up.Close()
					if f.gone != nil {
						close(f.gone)
					}
					delete(p.flows, k)
				}
			}
			p.mu.Unlock()
		}
	}
}
