package command

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/sct"
)

// SplitHostPort parses HOST[:PORT] with a default port, accepting bracketed
// IPv6 literals ("[::1]:8443") and bare ones without a port ("::1"). Any
// other text with more than one colon outside brackets is refused: taken
// whole as a host name, "a.test:443.b.test:443" would be looked up in DNS.
func SplitHostPort(s string, defPort int) (string, int, error) {
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		h, p, ok := strings.Cut(s[1:], "]")
		if !ok || (p != "" && !strings.HasPrefix(p, ":")) {
			return "", 0, fmt.Errorf("malformed address %q", s)
		}
		host, port = h, strings.TrimPrefix(p, ":")
	case strings.Count(s, ":") == 1:
		host, port, _ = strings.Cut(s, ":")
	case strings.Contains(s, ":"):
		if a, err := netip.ParseAddr(s); err != nil || !a.Is6() {
			return "", 0, fmt.Errorf("%q has more than one colon: want HOST or HOST:PORT, with an IPv6 address in brackets when a port follows ([2001:db8::1]:443)", s)
		}
	}
	if host == "" {
		return "", 0, fmt.Errorf("empty host in %q", s)
	}
	if port == "" {
		return host, defPort, nil
	}
	n, err := ParsePort(port)
	return host, n, err
}

// ParsePort parses a port number, 1 to 65535, in decimal digits only.
func ParsePort(p string) (int, error) {
	n := 0
	if p == "" || len(p) > 5 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return n, nil
}

// OneTarget reads the single HOST[:PORT] argument of check and probe
// (port 443 by default), or returns a usage error.
func OneTarget(pos []string) (string, int, error) {
	if len(pos) != 1 {
		return "", 0, UsageError("want exactly one HOST[:PORT], got %d arguments", len(pos))
	}
	if strings.Contains(pos[0], "://") {
		return "", 0, UsageError("%q is a URL: give HOST[:PORT], not a URL", pos[0])
	}
	host, port, err := SplitHostPort(pos[0], 443)
	if err != nil {
		return "", 0, UsageError("%v", err)
	}
	return host, port, nil
}

// SplitList splits a comma-separated flag value, dropping empty items and
// the spaces around each.
func SplitList(s string) []string {
	var out []string
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// StringList is a repeatable string flag.
type StringList []string

func (s *StringList) String() string     { return strings.Join(*s, ",") }
func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }

// ReadLimited reads the file at path, refusing one over limit bytes.
func ReadLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d accepted", path, fi.Size(), limit)
	}
	return os.ReadFile(path)
}

// ReadKeyArg reads a verifier key given literally or as @FILE.
func ReadKeyArg(s string) (string, error) {
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		b, err := ReadLimited(rest, 4<<10)
		if err != nil {
			return "", err
		}
		s = string(b)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("empty verifier key")
	}
	if !strings.Contains(s, "+") {
		// A note verifier key is name+hash+key; a file name given without
		// its @ is the usual slip.
		hint := ""
		if _, err := os.Stat(s); err == nil || strings.ContainsAny(s, `/\`) || strings.HasSuffix(s, ".pub") {
			hint = fmt.Sprintf("; to read the key from a file, write @%s", s)
		}
		return "", fmt.Errorf("%q is not a verifier key (NAME+HASH+KEY)%s", s, hint)
	}
	return s, nil
}

// PrefixWriter writes each write to Env's stderr after Prefix: progress
// lines of a library, marked as the command's.
type PrefixWriter struct {
	Env    *Env
	Prefix string
}

func (w PrefixWriter) Write(b []byte) (int, error) {
	fmt.Fprintf(w.Env.Stderr, "%s%s", w.Prefix, b)
	return len(b), nil
}

// Millis formats d in milliseconds with two decimals ("1.25 ms").
func Millis(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// Plural returns "s" unless n is 1.
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ReadSCTList reads the file of an --sct-list flag: a TLS
// SignedCertificateTimestampList as a server sends it (binary), and
// returns its SCTs' bytes. Errors are usage errors naming the flag.
func ReadSCTList(path string) ([][]byte, error) {
	b, err := ReadLimited(path, 64<<10)
	if err != nil {
		return nil, UsageError("--sct-list: %v", err)
	}
	scts, err := sct.ParseList(b, sct.TLSExtension)
	if err != nil {
		return nil, UsageError("--sct-list %s: %v", path, err)
	}
	out := make([][]byte, len(scts))
	for i, s := range scts {
		out[i] = s.Raw
	}
	return out, nil
}
