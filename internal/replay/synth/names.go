package synth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/pkie/pkie/internal/replay"
)

// Naming methods, in the order Config.Naming lists them.
const (
	MethodSNI  = "sni"  // the TLS server name the trace recorded
	MethodMap  = "map"  // a mapping file of "ADDR NAME" lines
	MethodRDNS = "rdns" // reverse DNS of the server address, as the paper did
)

// A Namer names server addresses: a mapping file, reverse DNS answers, or a
// generator's reverse map.
type Namer interface {
	Name(addr netip.Addr) (string, bool)
}

// A Looker is a Namer that can also say whether it has an answer, named or
// not, for an address. Flows whose address a Looker never looked up are not
// counted either way when SNI naming is compared with address naming.
type Looker interface {
	Looked(addr netip.Addr) bool
}

// A DeadSet marks hosts that no longer serve TLS, as a generator chooses
// them.
type DeadSet interface {
	Dead(host string) bool
}

// CanonicalName lower-cases name, drops one trailing dot, and checks that
// the result is a DNS name a notary accepts as a target: at most 253 bytes,
// labels of 1 to 63 letters, digits, hyphens or underscores (PTR and
// service names use them). IP literals are not names.
func CanonicalName(name string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	if n == "" {
		return "", errors.New("empty name")
	}
	if len(n) > 253 {
		return "", fmt.Errorf("name is %d bytes; a DNS name has at most 253", len(n))
	}
	if _, err := netip.ParseAddr(n); err == nil {
		return "", fmt.Errorf("%q is an address, not a name", n)
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("name %q has an empty or over-long label", clip(n))
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("name %q contains %q, which a DNS name cannot", clip(n), c)
			}
		}
	}
	return n, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Map is a mapping file's address → name table.
type Map map[netip.Addr]string

// Name returns the name mapped to addr.
func (m Map) Name(addr netip.Addr) (string, bool) {
	n, ok := m[addr.Unmap()]
	return n, ok
}

// Looked reports whether the map has addr: a map answers for every address,
// so it has always looked.
func (m Map) Looked(netip.Addr) bool { return true }

// maxMapLine bounds a mapping file's line.
const maxMapLine = 4096

// ParseMap reads a mapping file: one "ADDR NAME" per line, separated by
// spaces or tabs; '#' starts a comment; blank lines are skipped. Names are
// canonicalised as CanonicalName says. A malformed line, or an address
// named twice with different names, is an error naming the line.
func ParseMap(r io.Reader) (Map, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxMapLine)
	m := Map{}
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"ADDR NAME\", got %d fields", line, len(fields))
		}
		addr, err := netip.ParseAddr(fields[0])
		if err != nil || addr.Zone() != "" {
			return nil, fmt.Errorf("line %d: %q is not an IP address", line, clip(fields[0]))
		}
		name, err := CanonicalName(fields[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		addr = addr.Unmap()
		if old, ok := m[addr]; ok && old != name {
			return nil, fmt.Errorf("line %d: %s is already named %s", line, addr, old)
		}
		m[addr] = name
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return m, nil
}

// NeedsRDNS reports whether naming f as cfg says needs reverse DNS of its
// server address: no method before "rdns" in cfg.Naming settles it. With
// Compare on, a flow the SNI names still needs its address named, to count
// what SNI recovers. It is how the first pass chooses the addresses to look
// up.
func (cfg *Config) NeedsRDNS(f *replay.Flow) bool {
	for _, m := range cfg.Naming {
		switch m {
		case MethodRDNS:
			return true
		case MethodSNI:
			if f.ServerName != "" && !cfg.Compare {
				return false
			}
		case MethodMap:
			// The map before reverse DNS: if it names the address, flow
			// naming and the comparison are both settled.
			if cfg.Map != nil {
				if _, ok := cfg.Map.Name(f.Server); ok {
					return false
				}
			}
		}
	}
	return false
}
