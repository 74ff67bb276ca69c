package pecwire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"

	"github.com/pkie/pkie"
)

// TypeServerSubmit is a PEC server's submission for a client: a Submit
// with the ticket the client's PEC extension carried.
const TypeServerSubmit Type = 9

// Sizes of a ticket.
const (
	TicketTagSize = 16
	TicketSize    = 4 + TicketTagSize
)

// ticketExporterLabel names the key both ends of a client's session
// export from its TLS connection (RFC 8446 §7.5). It never travels, so an
// eavesdropper on the client's ClientHellos cannot mint tickets.
const ticketExporterLabel = "EXPORTER-pkie pec ticket key v1"

// Ticket lets a PEC server submit for a client once: the client mints one
// per PEC extension under the key of its session with the cloud
// (Conn.TicketKey), and the cloud takes a submission by any other session
// for that client only with a ticket whose tag verifies and whose counter
// it has not seen. Whoever copies a ClientHello's ticket can race the
// server with it, but only for that connection, that server name, port
// and requests, and only once.
type Ticket struct {
	// Counter numbers the client's tickets on one session, from 0.
	Counter uint32
	// Tag is TicketTag's.
	Tag [TicketTagSize]byte
}

// TicketTag computes the tag of ticket counter n for m:
//
//	HMAC-SHA256(key, "pkie pec ticket v1" | 0x00 | n u32 | digest)[:16]
//
// where digest is m's Submit digest with no certificate (chain_count 0)
// and the ct request's parameters empty: the ticket binds the client, the
// nonce, the server name (ASCII case folded), the port and the requests
// with their parameters, and leaves what the client does not know when it
// sends its ClientHello: the chain, the ct request's parameters (the SCTs
// the server delivers beside its certificate, which a PEC server adds to
// its submission) and the budget.
func TicketTag(key []byte, n uint32, m *Submit) [TicketTagSize]byte {
	bare := *m
	bare.Chain = nil
	bare.Requests = make([]pkie.Request, len(m.Requests))
	for i, r := range m.Requests {
		if r.ID == pkie.CT {
			r.Params = nil
		}
		bare.Requests[i] = r
	}
	d := bare.Digest()
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("pkie pec ticket v1\x00"))
	mac.Write(binary.BigEndian.AppendUint32(nil, n))
	mac.Write(d[:])
	var tag [TicketTagSize]byte
	copy(tag[:], mac.Sum(nil))
	return tag
}

// MintTicket returns ticket n for m.
func MintTicket(key []byte, n uint32, m *Submit) Ticket {
	return Ticket{Counter: n, Tag: TicketTag(key, n, m)}
}

// Verify reports whether t's tag is right for m under key, in constant
// time. It says nothing about reuse: the cloud remembers the counters.
func (t Ticket) Verify(key []byte, m *Submit) bool {
	want := TicketTag(key, t.Counter, m)
	return len(key) > 0 && hmac.Equal(want[:], t.Tag[:])
}

// TicketKey exports the session's ticket key from its TLS connection;
// the client and the cloud get the same 32 bytes, nobody else can.
func (c *Conn) TicketKey() ([]byte, error) {
	if c.export == nil {
		return nil, errors.New("pecwire: this session has no TLS exporter")
	}
	return c.export(ticketExporterLabel, nil, 32)
}

// ServerSubmit is a PEC server's submission for the client its PEC
// extension named, with that extension's ticket.
type ServerSubmit struct {
	Ticket Ticket
	Submit Submit
}

func (*ServerSubmit) Type() Type { return TypeServerSubmit }

func (m *ServerSubmit) appendBody(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, m.Ticket.Counter)
	b = append(b, m.Ticket.Tag[:]...)
	return m.Submit.appendBody(b)
}

func (m *ServerSubmit) decodeBody(r *reader) error {
	m.Ticket.Counter = r.u32()
	r.copy(m.Ticket.Tag[:])
	if r.err != nil {
		return r.err
	}
	return m.Submit.decodeBody(r)
}
