package replay

import (
	"errors"
	"fmt"
	"strings"
)

// errNeedMore reports that the bytes given are a valid prefix of a
// ClientHello whose end has not been seen yet.
var errNeedMore = errors.New("replay: ClientHello incomplete")

// maxHelloBytes bounds what is reassembled and parsed of a client's first
// bytes: a ClientHello, even with post-quantum key shares and padding, fits
// well within it, and nothing past it is kept.
const maxHelloBytes = 16 << 10

// parseSNI reads the server name from the TLS ClientHello at the start of
// b, the client's first bytes on the connection. It reassembles the
// handshake message across TLS records (RFC 8446, §5.1, allows a
// ClientHello to span several) and is strict: anything that is not a
// well-formed ClientHello is an error, since a trace's port 443 carries
// other protocols too. It returns errNeedMore when b ends before the
// ClientHello does, and "" with a nil error for a ClientHello that has no
// server_name extension.
func parseSNI(b []byte) (string, error) {
	// Gather the handshake bytes from consecutive handshake records.
	var hs []byte
	for {
		if len(b) < 5 {
			if len(b) > 0 && b[0] != 22 {
				return "", fmt.Errorf("replay: record type %d, not handshake", b[0])
			}
			return "", errNeedMore
		}
		if b[0] != 22 {
			return "", fmt.Errorf("replay: record type %d, not handshake", b[0])
		}
		if b[1] != 3 {
			return "", fmt.Errorf("replay: record version %d.%d, not TLS", b[1], b[2])
		}
		n := int(b[3])<<8 | int(b[4])
		if n == 0 || n > 1<<14 {
			return "", fmt.Errorf("replay: handshake record of %d bytes", n)
		}
		if len(b) < 5+n {
			// Take what there is: the message may be decided already.
			hs = append(hs, b[5:]...)
			b = nil
		} else {
			hs = append(hs, b[5:5+n]...)
			b = b[5+n:]
		}
		if len(hs) >= 4 {
			if hs[0] != 1 {
				return "", fmt.Errorf("replay: handshake message type %d, not ClientHello", hs[0])
			}
			m := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
			if m > maxHelloBytes {
				return "", fmt.Errorf("replay: ClientHello of %d bytes, over the %d-byte bound", m, maxHelloBytes)
			}
			if len(hs) >= 4+m {
				return parseHelloBody(hs[4 : 4+m])
			}
		}
		if b == nil {
			return "", errNeedMore
		}
	}
}

// parseHelloBody reads a ClientHello's body (RFC 8446, §4.1.2).
func parseHelloBody(body []byte) (string, error) {
	p := helloParser{b: body}
	if v := p.u16(); v>>8 != 3 {
		return "", fmt.Errorf("replay: ClientHello version %#04x", v)
	}
	p.take(32)         // random
	p.take(p.vec8(32)) // legacy_session_id
	suites := p.u16()
	if suites < 2 || suites%2 != 0 {
		p.fail("cipher suites")
	}
	p.take(suites)
	if p.take(p.vec8(255)); p.lastLen < 1 {
		p.fail("compression methods")
	}
	if p.err != nil {
		return "", p.err
	}
	if len(p.b) == 0 {
		return "", nil // no extensions at all (TLS 1.0 style)
	}
	ext := p.take(p.u16())
	if p.err != nil {
		return "", p.err
	}
	if len(p.b) != 0 {
		return "", errors.New("replay: bytes after the ClientHello's extensions")
	}
	e := helloParser{b: ext}
	name, seen := "", map[int]bool{}
	for len(e.b) > 0 && e.err == nil {
		typ := e.u16()
		data := e.take(e.u16())
		if e.err != nil {
			break
		}
		if seen[typ] {
			return "", fmt.Errorf("replay: extension %d repeated", typ)
		}
		seen[typ] = true
		if typ != 0 {
			continue
		}
		var err error
		if name, err = parseServerNameExt(data); err != nil {
			return "", err
		}
	}
	if e.err != nil {
		return "", e.err
	}
	return name, nil
}

// parseServerNameExt reads a server_name extension (RFC 6066, §3): one
// host_name, which must be a DNS name (no trailing dot, no IP literal
// check: a client that sends one is recorded as it sent it, lower-cased).
func parseServerNameExt(data []byte) (string, error) {
	p := helloParser{b: data}
	list := helloParser{b: p.take(p.u16())}
	if p.err != nil || len(p.b) != 0 || len(list.b) == 0 {
		return "", errors.New("replay: malformed server_name extension")
	}
	name := ""
	for len(list.b) > 0 && list.err == nil {
		typ := list.u8()
		v := list.take(list.u16())
		if list.err != nil {
			break
		}
		if typ != 0 {
			continue // RFC 6066 leaves room for other name types
		}
		if name != "" {
			return "", errors.New("replay: two host names in server_name")
		}
		if err := checkHostName(v); err != nil {
			return "", err
		}
		name = strings.ToLower(string(v))
	}
	if list.err != nil {
		return "", errors.New("replay: malformed server_name extension")
	}
	return name, nil
}

// checkHostName accepts the bytes of a DNS host name: 1 to 253 bytes of
// letters, digits, hyphens, underscores (seen in the wild) and dots, no
// empty label, no label over 63 bytes.
func checkHostName(v []byte) error {
	if len(v) == 0 || len(v) > 253 {
		return fmt.Errorf("replay: server name of %d bytes", len(v))
	}
	label := 0
	for _, c := range v {
		switch {
		case c == '.':
			if label == 0 {
				return errors.New("replay: server name has an empty label")
			}
			label = 0
			continue
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return fmt.Errorf("replay: server name has byte %#02x", c)
		}
		label++
		if label > 63 {
			return errors.New("replay: server name has a label over 63 bytes")
		}
	}
	if label == 0 {
		return errors.New("replay: server name ends with a dot")
	}
	return nil
}

// helloParser reads big-endian fields, remembering the first error.
type helloParser struct {
	b       []byte
	err     error
	lastLen int
}

func (p *helloParser) fail(what string) {
	if p.err == nil {
		p.err = fmt.Errorf("replay: malformed ClientHello (%s)", what)
	}
}

func (p *helloParser) take(n int) []byte {
	if p.err != nil {
		return nil
	}
	if n > len(p.b) {
		p.fail("truncated")
		return nil
	}
	v := p.b[:n]
	p.b = p.b[n:]
	return v
}

func (p *helloParser) u8() int {
	v := p.take(1)
	if v == nil {
		return 0
	}
	return int(v[0])
}

func (p *helloParser) u16() int {
	v := p.take(2)
	if v == nil {
		return 0
	}
	return int(v[0])<<8 | int(v[1])
}

// vec8 reads an 8-bit length prefix no greater than max.
func (p *helloParser) vec8(max int) int {
	n := p.u8()
	if n > max {
		p.fail("vector length")
		n = 0
	}
	p.lastLen = n
	return n
}
