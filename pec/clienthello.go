package pec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxClientHello bounds the ClientHello a PEC server reads before the TLS
// stack sees it. Go's and browsers' ClientHellos are 300 to 2,000 bytes
// (post-quantum key shares included); a bigger one is served, but not read
// for the extension.
const MaxClientHello = 16 << 10

// TLS record and handshake constants (RFC 8446 §5.1, §4).
const (
	recordHandshake    = 22
	recordHeader       = 5
	maxRecordPlaintext = 1 << 14
	handshakeHello     = 1
	extServerName      = 0
)

// clientHello is what a PEC server needs of a ClientHello.
type clientHello struct {
	// ServerName is the SNI host name, lower case; empty without SNI.
	ServerName string
	// PEC is the PEC extension's body, nil when there is none.
	PEC []byte
	// HasPEC says the extension was present (possibly empty).
	HasPEC bool
}

// errNotTLS says the first bytes are not a TLS handshake record: the
// connection is handed on untouched and the TLS stack answers it.
var errNotTLS = errors.New("pec: not a TLS handshake")

// readClientHello reads TLS records from r until it holds a whole
// ClientHello handshake message, and returns every byte it read (to be
// replayed to the TLS stack) and the message parsed. It reads at most
// limit bytes of handshake message. On any error raw still holds what was
// read, so that the caller can hand it on: the TLS stack, not this reader,
// answers a malformed handshake.
func readClientHello(r io.Reader, limit int) (raw []byte, hello *clientHello, err error) {
	var msg []byte
	need := -1 // the message's whole length, once known
	for need < 0 || len(msg) < need {
		var h [recordHeader]byte
		n, err := io.ReadFull(r, h[:])
		raw = append(raw, h[:n]...)
		if err != nil {
			return raw, nil, fmt.Errorf("pec: reading the ClientHello: %w", err)
		}
		if h[0] != recordHandshake || h[1] != 3 {
			return raw, nil, errNotTLS
		}
		rl := int(binary.BigEndian.Uint16(h[3:]))
		if rl == 0 || rl > maxRecordPlaintext {
			return raw, nil, fmt.Errorf("pec: handshake record of %d bytes", rl)
		}
		if len(msg)+rl > limit+4 {
			return raw, nil, fmt.Errorf("pec: ClientHello over %d bytes", limit)
		}
		start := len(raw)
		raw = append(raw, make([]byte, rl)...)
		n, err = io.ReadFull(r, raw[start:])
		raw = raw[:start+n]
		if err != nil {
			return raw, nil, fmt.Errorf("pec: reading the ClientHello: %w", err)
		}
		msg = append(msg, raw[start:]...)
		if need < 0 && len(msg) >= 4 {
			if msg[0] != handshakeHello {
				return raw, nil, fmt.Errorf("pec: first handshake message is type %d, not a ClientHello", msg[0])
			}
			need = 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
			if need-4 > limit {
				return raw, nil, fmt.Errorf("pec: ClientHello of %d bytes, limit %d", need-4, limit)
			}
		}
	}
	if len(msg) != need {
		// Another handshake message shares the record: not in a first
		// flight.
		return raw, nil, errors.New("pec: bytes after the ClientHello in its record")
	}
	hello, err = parseClientHello(msg[4:])
	return raw, hello, err
}

// parseClientHello parses a ClientHello message's body (RFC 8446 §4.1.2,
// RFC 5246 §7.4.1.2) for its SNI and PEC extension.
func parseClientHello(b []byte) (*clientHello, error) {
	p := parser{b: b}
	p.skip(2 + 32) // legacy_version, random
	p.skip(p.vec8(32))
	if n := p.u16(); n < 2 || n%2 != 0 {
		return nil, fmt.Errorf("pec: ClientHello with %d bytes of cipher suites", n)
	} else {
		p.skip(n)
	}
	if n := p.vec8(255); n < 1 {
		return nil, errors.New("pec: ClientHello with no compression method")
	} else {
		p.skip(n)
	}
	if p.err != nil {
		return nil, p.err
	}
	h := &clientHello{}
	if len(p.b) == 0 {
		return h, nil // no extensions (TLS 1.2 and older)
	}
	n := p.u16()
	if p.err == nil && n != len(p.b) {
		return nil, fmt.Errorf("pec: ClientHello extensions say %d bytes, %d follow", n, len(p.b))
	}
	seen := map[uint16]bool{}
	for p.err == nil && len(p.b) > 0 {
		typ := uint16(p.u16())
		l := p.u16()
		v := p.take(l)
		if p.err != nil {
			break
		}
		if seen[typ] {
			return nil, fmt.Errorf("pec: ClientHello repeats extension %d", typ)
		}
		seen[typ] = true
		switch typ {
		case extServerName:
			name, err := parseSNI(v)
			if err != nil {
				return nil, err
			}
			h.ServerName = name
		case ExtensionType:
			h.PEC, h.HasPEC = v, true
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	return h, nil
}

// parseSNI returns the host_name of a server_name extension (RFC 6066 §3).
func parseSNI(v []byte) (string, error) {
	p := parser{b: v}
	list := p.take(p.u16())
	if p.err != nil || len(p.b) != 0 {
		return "", errors.New("pec: malformed server_name extension")
	}
	q := parser{b: list}
	name := ""
	for q.err == nil && len(q.b) > 0 {
		t := q.u8()
		n := q.take(q.u16())
		if q.err == nil && t == 0 {
			if name != "" {
				return "", errors.New("pec: server_name names two hosts")
			}
			if len(n) == 0 || len(n) > 255 {
				return "", errors.New("pec: server_name host of bad length")
			}
			for _, c := range n {
				if c <= ' ' || c >= 0x7f {
					return "", errors.New("pec: server_name host is not printable ASCII")
				}
			}
			name = strings.ToLower(strings.TrimSuffix(string(n), "."))
		}
	}
	if q.err != nil {
		return "", errors.New("pec: malformed server_name extension")
	}
	return name, nil
}

// parser reads big-endian fields; the first short read sets err and every
// later read returns zero.
type parser struct {
	b   []byte
	err error
}

func (p *parser) take(n int) []byte {
	if p.err != nil {
		return nil
	}
	if n > len(p.b) {
		p.err = errors.New("pec: truncated ClientHello")
		return nil
	}
	v := p.b[:n]
	p.b = p.b[n:]
	return v
}

func (p *parser) skip(n int) { p.take(n) }

func (p *parser) u8() int {
	v := p.take(1)
	if v == nil {
		return 0
	}
	return int(v[0])
}

func (p *parser) u16() int {
	v := p.take(2)
	if v == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(v))
}

// vec8 reads a one-byte length and checks it against max.
func (p *parser) vec8(max int) int {
	n := p.u8()
	if n > max && p.err == nil {
		p.err = fmt.Errorf("pec: ClientHello vector of %d bytes, at most %d", n, max)
	}
	return n
}
