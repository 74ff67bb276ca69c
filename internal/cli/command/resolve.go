package command

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/pkie/pkie/probe"
)

// resolveSyntax is the form of one --resolve entry, as every command that
// takes the flag writes it.
const resolveSyntax = "HOST[:PORT]=IP[:PORT]"

// Resolves is the table --resolve and --resolve-file build, like curl's
// --resolve: the testbed, the demo and an operator's trials live on
// loopback. Every command that takes the flags parses them here, so they
// mean the same everywhere. An entry naming a port applies to that port of
// the host only and wins over one that does not, which applies to every
// port; an address without a port keeps the port asked for. Names not in
// the table are resolved by DNS.
type Resolves struct {
	byHostPort map[string][]netip.AddrPort // "host:port"
	byHost     map[string][]netip.AddrPort
}

// AddResolveFlags defines --resolve (repeatable) on fs and, when file is
// set, --resolve-file; what says what the mapped names are used for.
func AddResolveFlags(fs *flag.FlagSet, what string, file bool) *Resolves {
	r := &Resolves{}
	fs.Func("resolve", "map `"+resolveSyntax+"`: connect to IP (on PORT, else the port asked for) for HOST ("+what+") instead of using DNS; with HOST:PORT, only for that port; repeatable", r.add)
	if file {
		fs.Func("resolve-file", "read --resolve entries from `FILE`, one a line: HOST[:PORT] IP[:PORT] or HOST[:PORT]=IP[:PORT]; blank lines and # comments skipped", r.addFile)
	}
	return r
}

// add adds one entry, HOST[:PORT]=IP[:PORT].
func (r *Resolves) add(spec string) error {
	name, addr, ok := strings.Cut(strings.TrimSpace(spec), "=")
	if !ok || name == "" || addr == "" {
		return fmt.Errorf("%q: want %s", ClipArg(spec), resolveSyntax)
	}
	host, port, err := SplitHostPort(name, 0)
	if err != nil {
		return fmt.Errorf("%q: %v", ClipArg(spec), err)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		// A bare IP keeps the port asked for.
		ip, err2 := netip.ParseAddr(strings.Trim(addr, "[]"))
		if err2 != nil {
			return fmt.Errorf("%q: %q is not an IP or IP:PORT address (want %s)", ClipArg(spec), ClipArg(addr), resolveSyntax)
		}
		ap = netip.AddrPortFrom(ip, 0)
	} else if ap.Port() == 0 {
		return fmt.Errorf("%q: port 0 is not a port", ClipArg(spec))
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	host = resolveKey(host)
	if r.byHost == nil {
		r.byHostPort, r.byHost = map[string][]netip.AddrPort{}, map[string][]netip.AddrPort{}
	}
	if port == 0 {
		r.byHost[host] = append(r.byHost[host], ap)
	} else {
		k := net.JoinHostPort(host, strconv.Itoa(port))
		r.byHostPort[k] = append(r.byHostPort[k], ap)
	}
	return nil
}

// addFile adds the entries of a file, one a line: "HOST[:PORT] IP[:PORT]"
// or "HOST[:PORT]=IP[:PORT]"; blank lines and lines starting with # are
// skipped. An error names the file and the line.
func (r *Resolves) addFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if err := r.addLine(sc.Text()); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// addLine adds one line of a resolve file.
func (r *Resolves) addLine(line string) error {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return nil
	}
	switch fields := strings.Fields(line); {
	case len(fields) == 2 && !strings.Contains(line, "="):
		line = fields[0] + "=" + fields[1]
	case len(fields) != 1:
		return fmt.Errorf("%q: want HOST[:PORT] IP[:PORT] or %s", ClipArg(line), resolveSyntax)
	}
	return r.add(line)
}

// String lists the table's entries, for a log line.
func (r *Resolves) String() string {
	var out []string
	for _, m := range []map[string][]netip.AddrPort{r.byHostPort, r.byHost} {
		for name, as := range m {
			for _, a := range as {
				to := a.String()
				if a.Port() == 0 {
					to = a.Addr().String()
				}
				out = append(out, name+"="+to)
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// Empty reports whether the table maps nothing.
func (r *Resolves) Empty() bool { return len(r.byHost) == 0 && len(r.byHostPort) == 0 }

// Addrs returns every address the table maps a name to.
func (r *Resolves) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, m := range []map[string][]netip.AddrPort{r.byHostPort, r.byHost} {
		for _, as := range m {
			for _, a := range as {
				if !slices.Contains(out, a.Addr()) {
					out = append(out, a.Addr())
				}
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Lookup is a probe.Lookup: mapped names to their addresses, others by
// DNS.
func (r *Resolves) Lookup(ctx context.Context, host string, port int) ([]netip.AddrPort, error) {
	if as, ok := r.Find(host, port); ok {
		return as, nil
	}
	return probe.LookupDNS(ctx, host, port)
}

// resolveKey is the form a host name is mapped under: "Site.Test." and
// "site.test" are one name.
func resolveKey(host string) string { return strings.ToLower(strings.TrimRight(host, ".")) }

// Find returns the addresses the table maps host and port to, if any: an
// entry for the port wins over one for the host.
func (r *Resolves) Find(host string, port int) ([]netip.AddrPort, bool) {
	host = resolveKey(host)
	as, ok := r.byHostPort[net.JoinHostPort(host, strconv.Itoa(port))]
	if !ok {
		as, ok = r.byHost[host]
	}
	if !ok {
		return nil, false
	}
	out := make([]netip.AddrPort, len(as))
	for i, a := range as {
		if a.Port() == 0 {
			a = netip.AddrPortFrom(a.Addr(), uint16(port))
		}
		out[i] = a
	}
	return out, true
}

// Dial connects to addr ("host:port"), sending a mapped name to the first
// of its addresses; for connections that do not go through a probe (a
// notary's API).
func (r *Resolves) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return d.DialContext(ctx, network, addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return d.DialContext(ctx, network, addr)
	}
	as, ok := r.Find(h, port)
	if !ok || len(as) == 0 {
		return d.DialContext(ctx, network, addr)
	}
	for _, a := range as {
		var c net.Conn
		if c, err = d.DialContext(ctx, network, a.String()); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// ClipArg shortens a user's argument quoted back in an error.
func ClipArg(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
