package cloud

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

// Client–server deployment with privacy (PEC paper §7): a PEC server sends
// the client's ephemeral identifier, per-connection key and forwarder
// address with its chain (ServerSealed); the cloud proves the chain and
// sends each outcome, sealed to the key, to that forwarder on a session of
// its own. Only forwarders the operator lists (Config.Forwarders) are
// dialled, so a client cannot aim the cloud at arbitrary addresses.

// linkPing is the keepalive of a session to a forwarder, below any
// forwarder's idle timeout (three missed 15 s keepalives by default).
const linkPing = 5 * time.Second

// forwarderLinks are the cloud's sessions to forwarders, by address.
type forwarderLinks struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	byAddr map[string]*pecwire.Bundle

	mu    sync.Mutex
	links map[string]*session
	wg    sync.WaitGroup
}

func (c *Cloud) fwdLinks() *forwarderLinks {
	l := &c.fwd
	l.once.Do(func() {
		l.ctx, l.cancel = context.WithCancel(context.Background())
		l.byAddr = map[string]*pecwire.Bundle{}
		l.links = map[string]*session{}
		for _, b := range c.cfg.Forwarders {
			for _, p := range b.Points {
				if p.QUIC != "" {
					l.byAddr[pecwire.QUIC+"://"+p.QUIC] = b
				}
				if p.TCP != "" {
					l.byAddr[pecwire.TCP+"://"+p.TCP] = b
				}
			}
		}
	})
	return l
}

// closeLinks ends the sessions to forwarders (Wait calls it).
func (c *Cloud) closeLinks() {
	l := c.fwdLinks()
	l.cancel()
	l.wg.Wait()
}

var errNoForwarder = errors.New("this cloud relays to no such forwarder")

// link returns the open session to the forwarder at addr, opening one if
// needed.
func (c *Cloud) link(addr string) (*session, error) {
	l := c.fwdLinks()
	b := l.byAddr[addr]
	if b == nil {
		return nil, errNoForwarder
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.links[addr]; s != nil && s.ctx.Err() == nil {
		return s, nil
	}
	if l.ctx.Err() != nil {
		return nil, errShutdown
	}
	pin, err := b.Pin()
	if err != nil {
		return nil, err
	}
	transport, hostport, _ := strings.Cut(addr, "://")
	dctx, cancel := context.WithTimeout(l.ctx, c.cfg.HandshakeTimeout)
	defer cancel()
	// The cloud presents its own certificate, the key its bundle pins:
	// the forwarder relays proofs and rejections only from a cloud that
	// authenticated so.
	tc := pecwire.ClientTLS(pin)
	tc.Certificates = []tls.Certificate{c.cfg.Certificate}
	var conn *pecwire.Conn
	if transport == pecwire.QUIC {
		conn, err = pecwire.DialQUIC(dctx, hostport, tc, nil)
	} else {
		conn, err = pecwire.DialTCP(dctx, hostport, tc)
	}
	if err != nil {
		return nil, fmt.Errorf("forwarder %s: %w", addr, err)
	}
	sctx, scancel := context.WithCancelCause(l.ctx)
	s := &session{
		c: c, conn: conn, addr: addr, transport: conn.Transport(),
		out: make(chan pecwire.Message, c.cfg.MaxPending), ctx: sctx, cancel: scancel,
		inflight: map[dupKey]*job{}, done: map[dupKey]time.Time{}, otherBy: map[string]int{},
	}
	l.links[addr] = s
	stop := context.AfterFunc(sctx, func() { conn.Close() })
	l.wg.Go(s.writeLoop)
	l.wg.Go(func() {
		defer stop()
		// Its proved submissions count against MaxRemembered like any
		// session's; a dead link gives them back.
		defer s.forgetAll()
		// The forwarder answers pings and, when it ends the session,
		// says why; nothing else is expected.
		for {
			m, err := conn.Recv(time.Now().Add(3 * linkPing))
			if err != nil {
				s.cancel(fmt.Errorf("%w: %w", errClosed, err))
				return
			}
			if e, ok := m.(*pecwire.Error); ok {
				c.log.Warn("forwarder ended the cloud's session", "forwarder", addr, "err", e)
				s.cancel(errClosed)
				return
			}
		}
	})
	l.wg.Go(func() {
		t := time.NewTicker(linkPing)
		defer t.Stop()
		for seq := uint64(1); ; seq++ {
			if !s.push(&pecwire.Ping{Seq: seq}) {
				return
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return s, nil
}

// submitServerSealed handles a PEC server's submission for a client in
// privacy mode. The server is told of refusals; the client hears of
// nothing but its proofs.
func (c *Cloud) submitServerSealed(from *session, m *pecwire.ServerSealed) bool {
	received := time.Now()
	reject := func(code pecwire.RejectCode, text string) bool {
		c.m.submissions.WithLabelValues("rejected").Inc()
		c.m.rejects.WithLabelValues(code.String()).Inc()
		return from.push(&pecwire.EphIDReject{EphID: m.EphID, Code: code, Text: text})
	}
	sub := &m.Submit
	if !c.allowSubmit(from) {
		return reject(pecwire.RejectLimited, "this session or address is over its rate of submissions")
	}
	if len(sub.Requests) == 0 {
		return reject(pecwire.RejectInvalid, "the submission requests no enhancement")
	}
	if c.fwdLinks().byAddr[m.Forwarder] == nil {
		return reject(pecwire.RejectInvalid, errNoForwarder.Error())
	}
	if code := c.acquireJob(from.addr); code != 0 {
		if code == pecwire.RejectBusy {
			return reject(code, "too many submissions in flight: try another point of presence")
		}
		return reject(code, "this address has its share of submissions in flight")
	}
	certs, err := c.parseChain(sub.Chain)
	if err != nil {
		c.releaseJob(from.addr)
		return reject(pecwire.RejectInvalid, err.Error())
	}
	// Dialling the forwarder may take a handshake: not on the server's
	// read loop.
	key := m.Key
	eph := m.EphID
	c.wg.Go(func() {
		target, err := c.link(m.Forwarder)
		if err != nil {
			c.releaseJob(from.addr)
			c.log.Warn("no session to a forwarder", "forwarder", m.Forwarder, "err", err)
			return
		}
		if !target.reserve(len(sub.Requests), true) {
			c.releaseJob(from.addr)
			c.log.Warn("the session to a forwarder has no room for more outcomes", "forwarder", m.Forwarder)
			return
		}
		j := c.newJob(target, true, from.addr, sub, certs, received)
		j.seal = c.sealFor(key[:], eph)
		c.m.submissions.WithLabelValues("server_sealed").Inc()
		c.run(j)
	})
	return true
}
