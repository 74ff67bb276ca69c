package forwarder

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

// upstream is the forwarder's session to one cloud: opened on the first
// sealed submission for it, kept alive with pings, reopened when it
// breaks. The cloud's sealed proofs and rejections come back on it and
// are routed by their identifiers.
type upstream struct {
	f      *Forwarder
	bundle *pecwire.Bundle
	pin    [32]byte

	mu   sync.Mutex
	conn *pecwire.Conn
	stop context.CancelFunc
	done chan struct{}
}

// dialTimeout bounds opening a session to a cloud.
const dialTimeout = 5 * time.Second

// get returns the open session, or opens one at the first point of
// presence that answers.
func (u *upstream) get(ctx context.Context) (*pecwire.Conn, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn != nil {
		return u.conn, nil
	}
	tc := pecwire.ClientTLS(u.pin)
	var errs []error
	for _, p := range u.bundle.Points {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		var c *pecwire.Conn
		var err error
		if p.TCP != "" {
			var local net.Addr
			if u.f.cfg.UpstreamBind != nil {
				local = &net.TCPAddr{IP: u.f.cfg.UpstreamBind}
			}
			c, err = pecwire.DialTCPFrom(dctx, local, p.TCP, tc)
		} else {
			c, err = pecwire.DialQUIC(dctx, p.QUIC, tc, nil)
		}
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.SetMaxFrame(u.f.cfg.MaxFrame)
		lctx, stop := context.WithCancel(context.Background())
		u.conn, u.stop, u.done = c, stop, make(chan struct{})
		go u.readLoop(lctx, c, u.done)
		go u.pingLoop(lctx, c)
		u.f.m.upstreams.Inc()
		return c, nil
	}
	return nil, fmt.Errorf("forwarder: cloud %s: %w", u.bundle.Name, errors.Join(errs...))
}

// send relays one sealed submission, reopening the session once if it
// turns out broken.
func (u *upstream) send(ctx context.Context, m *pecwire.SealedSubmit) error {
	for attempt := 0; ; attempt++ {
		c, err := u.get(ctx)
		if err != nil {
			return err
		}
		u.f.tap("out", m)
		err = c.Send(m, time.Now().Add(u.f.cfg.WriteTimeout))
		if err == nil {
			return nil
		}
		u.drop(c)
		if attempt == 1 {
			return err
		}
	}
}

func (u *upstream) drop(c *pecwire.Conn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == c {
		u.stop()
		u.conn = nil
	}
	c.Close()
}

func (u *upstream) readLoop(ctx context.Context, c *pecwire.Conn, done chan struct{}) {
	defer close(done)
	defer u.drop(c)
	for {
		m, err := c.Recv(time.Time{})
		if err != nil {
			if ctx.Err() == nil {
				u.f.log.Debug("session to cloud ended", "cloud", u.bundle.Name, "err", err)
			}
			return
		}
		u.f.tap("in", m)
		switch m := m.(type) {
		case *pecwire.SealedProof:
			u.f.route(m.EphID, m)
		case *pecwire.EphIDReject:
			u.f.route(m.EphID, m)
		case *pecwire.Pong:
		case *pecwire.Error:
			u.f.log.Warn("cloud ended the forwarder's session", "cloud", u.bundle.Name, "err", m)
			return
		default:
			u.f.log.Warn("cloud sent an unexpected message", "cloud", u.bundle.Name, "type", m.Type())
			return
		}
	}
}

func (u *upstream) pingLoop(ctx context.Context, c *pecwire.Conn) {
	t := time.NewTicker(u.f.cfg.UpstreamPing)
	defer t.Stop()
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			seq++
			u.f.tap("out", &pecwire.Ping{Seq: seq})
			if err := c.Send(&pecwire.Ping{Seq: seq}, time.Now().Add(u.f.cfg.WriteTimeout)); err != nil {
				u.drop(c)
				return
			}
		}
	}
}

func (u *upstream) close() {
	u.mu.Lock()
	c, done := u.conn, u.done
	u.mu.Unlock()
	if c != nil {
		u.drop(c)
		<-done
	}
}
