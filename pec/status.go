package pec

import (
	"time"
)

// ClientStatus describes a client's session.
type ClientStatus struct {
	// Connected reports whether the client is registered with a cloud now;
	// false during a failover.
	Connected bool
	// Cloud is the name of the bundle in use, Point the address of its
	// point of presence and Transport the transport that won the race.
	Cloud, Point, Transport string
	// ClientID is the identifier the cloud gave the client.
	ClientID ClientID
	// Since is when the current session registered.
	Since time.Time
	// Registration is how long the current session took to register, from
	// the start of Dial or of the failover that opened it to Registered.
	Registration time.Duration
	// RTT is the round trip of the latest answered ping (of the
	// registration until the first pong).
	RTT time.Duration
	// Keepalive is the ping interval in use, and LastPong when the latest
	// answer to one arrived (zero: none yet on this session).
	Keepalive time.Duration
	LastPong  time.Time
	// Failovers counts moves to another point of presence or cloud after
	// the one in use died; LastFailover is how long the latest took, from
	// the first missed pong deadline (or the connection's failure) to the
	// new Registered.
	Failovers    int
	LastFailover time.Duration
	// Reregistrations counts new registrations after a cloud forgot the
	// client (Reject "unknown client").
	Reregistrations int
	// Pending counts submissions and expectations not yet complete.
	Pending int
	// Dropped counts outcomes dropped on arrival: for nonces nothing is
	// pending for, for enhancements not requested or already delivered, or
	// naming another client.
	Dropped uint64
	// LastError says why the latest session ended.
	LastError string
}

// Status describes the client's session now.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	st := c.st
	st.Pending = len(c.pending)
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return st
	}
	st.Connected = true
	st.Cloud = bundleName(c.cfg.Clouds[s.t.b])
	st.Point = s.addr
	st.Transport = s.transport
	st.ClientID = s.id
	st.Since = s.at
	st.Registration = s.at.Sub(s.started)
	st.Keepalive = s.keepalive
	s.pmu.Lock()
	st.RTT = s.rtt
	st.LastPong = s.lastPong
	s.pmu.Unlock()
	return st
}
