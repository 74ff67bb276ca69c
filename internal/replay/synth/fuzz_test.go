package synth

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseMap feeds the mapping-file parser arbitrary bytes: it must
// never panic, and what it accepts holds only canonical names, stable
// under another round through the parser.
func FuzzParseMap(f *testing.F) {
	f.Add([]byte("# c\n192.0.2.1 www.example.com\n2001:db8::1\tv6.example. # x\n"))
	f.Add([]byte("::ffff:192.0.2.2 A.Example\n192.0.2.2 a.example\n"))
	f.Add([]byte("192.0.2.1\n"))
	f.Add([]byte("fe80::1%eth0 a.example\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMap(bytes.NewReader(b))
		if err != nil {
			return
		}
		var sb strings.Builder
		for a, n := range m {
			if c, err := CanonicalName(n); err != nil || c != n {
				t.Fatalf("accepted name %q: %v", n, err)
			}
			if a != a.Unmap() || a.Zone() != "" {
				t.Fatalf("accepted address %v", a)
			}
			sb.WriteString(a.String() + " " + n + "\n")
		}
		m2, err := ParseMap(strings.NewReader(sb.String()))
		if err != nil || len(m2) != len(m) {
			t.Fatalf("rewritten map %q: %v", sb.String(), err)
		}
	})
}

// FuzzParseRDNSCache feeds the reverse-DNS cache parser arbitrary bytes:
// it must never panic, and what it accepts must write out and read back
// the same.
func FuzzParseRDNSCache(f *testing.F) {
	f.Add([]byte(rdnsCacheHeader + "192.0.2.1 www.example.com 2026-01-01T00:00:00Z\n192.0.2.2 - 2026-01-01T00:00:00Z\n"))
	f.Add([]byte("2001:db8::1 v6.example 2026-01-01T00:00:00+02:00\n"))
	f.Add([]byte("192.0.2.1 www.example.com\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseRDNSCache(bytes.NewReader(b))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if _, err := c.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		c2, err := ParseRDNSCache(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("written cache does not read back: %v\n%s", err, out.Bytes())
		}
		if c2.Len() != c.Len() {
			t.Fatalf("%d entries, %d read back", c.Len(), c2.Len())
		}
		for a, e := range c.m {
			if e2, ok := c2.Get(a); !ok || e2 != e {
				t.Fatalf("%v: %+v read back as %+v", a, e, e2)
			}
		}
	})
}
