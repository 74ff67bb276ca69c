package pec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// ExtensionType is the TLS extension code point of the PEC extension, the
// client's request for enhancements in its ClientHello in the client–server
// deployment of "Towards Sustainable Evolution for the TLS PKI" (PEC, ASIA
// CCS 2018, §4.1, Figure 2a).
//
// The paper leaves the code point to the IETF. 0xFFCE lies in the range RFC
// 8446 §11 reserves for private use (0xFF00–0xFFFF); it is not 0xFF01
// (renegotiation_info, the one code point of that range in common use), not
// a GREASE value (0x?A?A, RFC 8701) and not in uTLS's table of extensions
// browsers send, so no deployed server gives it a meaning.
const ExtensionType uint16 = 0xFFCE

// ExtensionVersion is the version of the extension's body this package
// writes and reads.
const ExtensionVersion = 1

// Limits of the extension.
const (
	// MaxExtension bounds an extension's body. A ClientHello's extensions
	// total at most 2^16-1 bytes; a client keeps the PEC extension small
	// (a hundred bytes with the built-in enhancements), and a server reads
	// no more than this.
	MaxExtension = 4096
	// MaxEphID bounds an ephemeral identifier.
	MaxEphID = 64
	// maxAddr bounds an address's host:port.
	maxAddr = 255
)

// Field types of the extension's body.
const (
	fieldClientID  = 1
	fieldNonce     = 2
	fieldRequests  = 3
	fieldCloud     = 4
	fieldEphID     = 5
	fieldKey       = 6
	fieldForwarder = 7
	fieldTicket    = 8
)

// Transport codes of an address field.
const (
	addrQUIC = 1
	addrTCP  = 2
)

// Extension is the body of the PEC TLS extension: who the client is at its
// cloud, which connection this is, what it asks to be proved and where the
// server should send its chain.
//
// On the wire it is version (uint8) followed by fields, each type (uint8) ‖
// length (uint16) ‖ value, in increasing type order, each at most once.
// docs/formats/pec.md documents each field.
type Extension struct {
	// ClientID is the identifier the cloud gave the client when it
	// registered. Zero when EphID stands for it.
	ClientID ClientID
	// Nonce names this connection; the cloud addresses the proofs by
	// client and nonce.
	Nonce Nonce
	// Requests are the enhancements wanted, with their parameters, in the
	// order the client would submit them.
	Requests []pkie.Request
	// Cloud is the point of presence the client is registered with: only
	// there does its identifier name it.
	Cloud Addr
	// Ticket, beside ClientID, is what lets a PEC server submit for the
	// client once (Ticket): minted by the client under a key it
	// shares with the cloud, for this nonce, server name, port and
	// requests. Client.NewExtension makes one.
	Ticket Ticket

	// The privacy fields (PEC paper §7, the privacy forwarder). All
	// optional.

	// EphID is an ephemeral identifier the forwarder issued, used once, in
	// place of ClientID: 1 to MaxEphID bytes, or empty.
	EphID []byte
	// Key is the per-connection key the cloud encrypts the proofs to;
	// all zero when absent.
	Key [32]byte
	// HasKey says Key is present.
	HasKey bool
	// Forwarder is the privacy forwarder's address, when the client uses
	// one; zero when absent.
	Forwarder Addr
}

// Addr is a cloud's (or forwarder's) address: host:port and the transport
// it is reached over.
type Addr struct {
	// Transport is TransportQUIC or TransportTCP.
	Transport string
	// HostPort is host:port, the host a name or an IP literal.
	HostPort string
}

// IsZero reports whether a is empty.
func (a Addr) IsZero() bool { return a == Addr{} }

// String renders a as transport://host:port.
func (a Addr) String() string { return a.Transport + "://" + a.HostPort }

// Check reports what is wrong with a.
func (a Addr) Check() error {
	if a.Transport != pecwire.QUIC && a.Transport != pecwire.TCP {
		return fmt.Errorf("transport %q: want %q or %q", a.Transport, pecwire.QUIC, pecwire.TCP)
	}
	if len(a.HostPort) > maxAddr {
		return fmt.Errorf("address of %d bytes, at most %d", len(a.HostPort), maxAddr)
	}
	h, p, err := net.SplitHostPort(a.HostPort)
	if err != nil || h == "" {
		return fmt.Errorf("address %q is not host:port", a.HostPort)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || p[0] == '0' || p[0] == '+' {
		return fmt.Errorf("address %q: port out of range 1-65535", a.HostPort)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("address %q: host has a byte 0x%02x", a.HostPort, c)
		}
	}
	return nil
}

func appendAddr(b []byte, a Addr) []byte {
	t := byte(addrQUIC)
	if a.Transport == pecwire.TCP {
		t = addrTCP
	}
	return append(append(b, t), a.HostPort...)
}

func parseAddr(v []byte) (Addr, error) {
	if len(v) < 1 {
		return Addr{}, errors.New("empty address")
	}
	var a Addr
	switch v[0] {
	case addrQUIC:
		a.Transport = pecwire.QUIC
	case addrTCP:
		a.Transport = pecwire.TCP
	default:
		return Addr{}, fmt.Errorf("unknown transport %d", v[0])
	}
	a.HostPort = string(v[1:])
	if err := a.Check(); err != nil {
		return Addr{}, err
	}
	return a, nil
}

// Marshal encodes the extension's body (without the extension's own type
// and length).
func (e *Extension) Marshal() ([]byte, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	reqs, err := pkie.MarshalRequests(e.Requests)
	if err != nil {
		return nil, fmt.Errorf("pec: extension: %w", err)
	}
	b := []byte{ExtensionVersion}
	field := func(t byte, v []byte) {
		b = append(b, t)
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
	}
	if len(e.EphID) == 0 {
		field(fieldClientID, e.ClientID[:])
	}
	field(fieldNonce, e.Nonce[:])
	field(fieldRequests, reqs)
	field(fieldCloud, appendAddr(nil, e.Cloud))
	if len(e.EphID) > 0 {
		field(fieldEphID, e.EphID)
	}
	if e.HasKey {
		field(fieldKey, e.Key[:])
	}
	if !e.Forwarder.IsZero() {
		field(fieldForwarder, appendAddr(nil, e.Forwarder))
	}
	if len(e.EphID) == 0 {
		field(fieldTicket, append(binary.BigEndian.AppendUint32(nil, e.Ticket.Counter), e.Ticket.Tag[:]...))
	}
	if len(b) > MaxExtension {
		return nil, fmt.Errorf("pec: extension of %d bytes exceeds %d", len(b), MaxExtension)
	}
	return b, nil
}

func (e *Extension) check() error {
	if len(e.Requests) == 0 {
		return errors.New("pec: extension requests no enhancement")
	}
	if len(e.EphID) > MaxEphID {
		return fmt.Errorf("pec: extension: EphID of %d bytes, at most %d", len(e.EphID), MaxEphID)
	}
	if len(e.EphID) > 0 && (e.ClientID != (ClientID{}) || e.Ticket != (Ticket{})) {
		return errors.New("pec: extension: an EphID replaces the client identifier and its ticket; set one, not both")
	}
	if err := e.Cloud.Check(); err != nil {
		return fmt.Errorf("pec: extension: cloud %w", err)
	}
	if !e.Forwarder.IsZero() {
		if err := e.Forwarder.Check(); err != nil {
			return fmt.Errorf("pec: extension: forwarder %w", err)
		}
	}
	return nil
}

// ParseExtension decodes an extension's body. It is strict: a known field
// out of order, repeated, of the wrong size or with a malformed value, a
// missing required field, a client identifier beside an EphID, or trailing
// bytes are errors. Fields of unknown types (a later version's optional
// fields) are skipped. A version other than ExtensionVersion is an error:
// a server that cannot read the extension serves the connection as any
// stock server would, and the client's own submission covers it.
func ParseExtension(b []byte) (*Extension, error) {
	if len(b) > MaxExtension {
		return nil, fmt.Errorf("pec: extension of %d bytes exceeds %d", len(b), MaxExtension)
	}
	if len(b) < 1 {
		return nil, errors.New("pec: empty extension")
	}
	if b[0] != ExtensionVersion {
		return nil, fmt.Errorf("pec: extension version %d, this pkie reads %d", b[0], ExtensionVersion)
	}
	b = b[1:]
	e := &Extension{}
	last := 0
	seen := map[int]bool{}
	for len(b) > 0 {
		if len(b) < 3 {
			return nil, fmt.Errorf("pec: extension: truncated field header (%d bytes)", len(b))
		}
		t := int(b[0])
		n := int(binary.BigEndian.Uint16(b[1:]))
		if n > len(b)-3 {
			return nil, fmt.Errorf("pec: extension: field %d says %d bytes, %d remain", t, n, len(b)-3)
		}
		v := b[3 : 3+n]
		b = b[3+n:]
		if t <= last {
			return nil, fmt.Errorf("pec: extension: field %d after field %d (fields are in increasing order, once each)", t, last)
		}
		last = t
		seen[t] = true
		var err error
		switch t {
		case fieldClientID:
			err = fixed(v, e.ClientID[:])
		case fieldNonce:
			err = fixed(v, e.Nonce[:])
		case fieldRequests:
			e.Requests, err = pkie.ParseRequests(v)
		case fieldCloud:
			e.Cloud, err = parseAddr(v)
		case fieldEphID:
			if len(v) == 0 || len(v) > MaxEphID {
				err = fmt.Errorf("%d bytes, want 1-%d", len(v), MaxEphID)
			}
			e.EphID = append([]byte(nil), v...)
		case fieldKey:
			err = fixed(v, e.Key[:])
			e.HasKey = true
		case fieldForwarder:
			e.Forwarder, err = parseAddr(v)
		case fieldTicket:
			if len(v) != pecwire.TicketSize {
				err = fmt.Errorf("%d bytes, want %d", len(v), pecwire.TicketSize)
				break
			}
			e.Ticket.Counter = binary.BigEndian.Uint32(v)
			copy(e.Ticket.Tag[:], v[4:])
		default:
			// A later version's optional field.
		}
		if err != nil {
			return nil, fmt.Errorf("pec: extension: field %d: %w", t, err)
		}
	}
	switch {
	case !seen[fieldNonce]:
		return nil, errors.New("pec: extension has no nonce")
	case !seen[fieldRequests] || len(e.Requests) == 0:
		return nil, errors.New("pec: extension requests no enhancement")
	case !seen[fieldCloud]:
		return nil, errors.New("pec: extension names no cloud")
	case seen[fieldClientID] == seen[fieldEphID]:
		return nil, errors.New("pec: extension needs exactly one of a client identifier and an EphID")
	case seen[fieldClientID] != seen[fieldTicket]:
		return nil, errors.New("pec: extension needs a ticket with a client identifier, and none with an EphID")
	}
	return e, nil
}

func fixed(v, dst []byte) error {
	if len(v) != len(dst) {
		return fmt.Errorf("%d bytes, want %d", len(v), len(dst))
	}
	copy(dst, v)
	return nil
}
