package httplimit

import (
	"net"
	"net/http"
	"net/netip"
)

// ClientKey returns the block of addresses that addr's connections and
// requests are counted under: the IP itself for IPv4 (IPv4-mapped IPv6
// addresses included), and its /64 for IPv6, since a single IPv6 subscriber
// is normally given at least a /64 and could otherwise pick a fresh address
// for every connection. An address that is not IP (a pipe, a Unix socket)
// gives the zero Prefix, which all such clients share.
func ClientKey(addr net.Addr) netip.Prefix {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case nil:
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	return prefixOf(ip)
}

// ClientName is ClientKey as a map key and a log field: the IPv4 address
// (an IPv4-mapped IPv6 one too), or the IPv6 /64 prefix. An address that is
// not an IP names itself.
func ClientName(addr net.Addr) string {
	p := ClientKey(addr)
	switch {
	case !p.IsValid():
		if addr == nil {
			return ""
		}
		return addr.String()
	case p.Addr().Is4():
		return p.Addr().String()
	}
	return p.String()
}

// RequestClientKey is ClientKey for a request: the connection's remote
// address (r.RemoteAddr). Headers such as X-Forwarded-For are the client's to
// forge and are never consulted.
func RequestClientKey(r *http.Request) netip.Prefix { return clientKeyString(r.RemoteAddr) }

// clientKeyString is ClientKey for an http.Request's RemoteAddr.
func clientKeyString(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		ip, _ := netip.ParseAddr(remote)
		return prefixOf(ip)
	}
	return prefixOf(ap.Addr())
}

func prefixOf(ip netip.Addr) netip.Prefix {
	if !ip.IsValid() {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}
