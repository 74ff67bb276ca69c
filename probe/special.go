package probe

import (
	"encoding/binary"
	"net/netip"
)

// Reachability is the "Globally Reachable" column of IANA's special-purpose
// address registries (RFC 6890 as updated by RFC 8190): whether a datagram
// to an address of the block may be forwarded beyond one administrative
// domain.
type Reachability uint8

// Values of the "Globally Reachable" column.
const (
	// NotGloballyReachable is the registry's "False".
	NotGloballyReachable Reachability = iota
	// GloballyReachable is the registry's "True".
	GloballyReachable
	// ReachabilityNA is the registry's "N/A" (6to4, Teredo: the answer
	// depends on the IPv4 address they carry), and the empty cells of the
	// terminated entries.
	ReachabilityNA
)

func (r Reachability) String() string {
	switch r {
	case GloballyReachable:
		return "True"
	case ReachabilityNA:
		return "N/A"
	}
	return "False"
}

// SpecialPurpose is one entry of the IANA IPv4 or IPv6 Special-Purpose
// Address Registry.
type SpecialPurpose struct {
	Prefix            netip.Prefix
	Name              string // as the registry spells it
	RFC               string // the registry's RFC column
	GloballyReachable Reachability
}

func sp(prefix, name, rfc string, r Reachability) SpecialPurpose {
	return SpecialPurpose{netip.MustParsePrefix(prefix), name, rfc, r}
}

// Short names for the table below.
const (
	no  = NotGloballyReachable
	yes = GloballyReachable
	na  = ReachabilityNA
)

// specialPurpose is every entry of the IANA IPv4 Special-Purpose Address
// Registry and of the IANA IPv6 Special-Purpose Address Registry, both as
// last updated 2025-10-09 (iana-ipv4-special-registry,
// iana-ipv6-special-registry), in the registries' order. The registry lists
// 192.0.0.170/32 and 192.0.0.171/32 as one entry; it is two here. When IANA
// adds an entry, add it here and to TestSpecialPurposeRegistry.
var specialPurpose = []SpecialPurpose{
	// IPv4.
	sp("0.0.0.0/8", `"This network"`, "RFC 791, Section 3.2", no),
	sp("0.0.0.0/32", `"This host on this network"`, "RFC 1122, Section 3.2.1.3", no),
	sp("10.0.0.0/8", "Private-Use", "RFC 1918", no),
	sp("100.64.0.0/10", "Shared Address Space", "RFC 6598", no),
	sp("127.0.0.0/8", "Loopback", "RFC 1122, Section 3.2.1.3", no),
	sp("169.254.0.0/16", "Link Local", "RFC 3927", no),
	sp("172.16.0.0/12", "Private-Use", "RFC 1918", no),
	sp("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890, Section 2.1", no),
	sp("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335", no),
	sp("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", no),
	sp("192.0.0.9/32", "Port Control Protocol Anycast", "RFC 7723", yes),
	sp("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC 8155", yes),
	sp("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 Section 2.2", no),
	sp("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 Section 2.2", no),
	sp("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737", no),
	sp("192.31.196.0/24", "AS112-v4", "RFC 7535", yes),
	sp("192.52.193.0/24", "AMT", "RFC 7450", yes),
	sp("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526", na), // terminated 2015-03; the columns are empty
	sp("192.88.99.2/32", "6a44-relay anycast address", "RFC 6751", no),
	sp("192.168.0.0/16", "Private-Use", "RFC 1918", no),
	sp("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC 7534", yes),
	sp("198.18.0.0/15", "Benchmarking", "RFC 2544", no),
	sp("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737", no),
	sp("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737", no),
	sp("240.0.0.0/4", "Reserved", "RFC 1112, Section 4", no),
	sp("255.255.255.255/32", "Limited Broadcast", "RFC 8190, RFC 919 Section 7", no),

	// IPv6.
	sp("::1/128", "Loopback Address", "RFC 4291", no),
	sp("::/128", "Unspecified Address", "RFC 4291", no),
	sp("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291", no),
	sp("64:ff9b::/96", "IPv4-IPv6 Translat.", "RFC 6052", yes),
	sp("64:ff9b:1::/48", "IPv4-IPv6 Translat.", "RFC 8215", no),
	sp("100::/64", "Discard-Only Address Block", "RFC 6666", no),
	sp("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780", no),
	sp("2001::/23", "IETF Protocol Assignments", "RFC 2928", no),
	sp("2001::/32", "TEREDO", "RFC 4380, RFC 8190", na),
	sp("2001:1::1/128", "Port Control Protocol Anycast", "RFC 7723", yes),
	sp("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC 8155", yes),
	sp("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", yes),
	sp("2001:2::/48", "Benchmarking", "RFC 5180, RFC Errata 1752", no),
	sp("2001:3::/32", "AMT", "RFC 7450", yes),
	sp("2001:4:112::/48", "AS112-v6", "RFC 7535", yes),
	sp("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843", na), // terminated 2014-03; the columns are empty
	sp("2001:20::/28", "ORCHIDv2", "RFC 7343", yes),
	sp("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", yes),
	sp("2001:db8::/32", "Documentation", "RFC 3849", no),
	sp("2002::/16", "6to4", "RFC 3056", na),
	sp("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC 7534", yes),
	sp("3fff::/20", "Documentation", "RFC 9637", no),
	sp("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602", no),
	sp("fc00::/7", "Unique-Local", "RFC 4193, RFC 8190", no),
	sp("fe80::/10", "Link-Local Unicast", "RFC 4291", no),
}

// SpecialPurposeRegistry returns a copy of the registry entries the guard
// embeds.
func SpecialPurposeRegistry() []SpecialPurpose {
	return append([]SpecialPurpose(nil), specialPurpose...)
}

// Blocks beside the special-purpose registries, from IANA's address-space
// registries.
var (
	multicast4 = netip.MustParsePrefix("224.0.0.0/4") // IPv4 Multicast Address Space (RFC 5771)
	multicast6 = netip.MustParsePrefix("ff00::/8")    // IPv6 Address Space: Multicast (RFC 4291)
	siteLocal  = netip.MustParsePrefix("fec0::/10")   // IPv6 Address Space: deprecated site-local (RFC 3879)
	compatible = netip.MustParsePrefix("::/96")       // IPv4-compatible, deprecated (RFC 4291 §2.5.5.1)
	unicast6   = netip.MustParsePrefix("2000::/3")    // IPv6 Address Space: the only block allocated as Global Unicast
	nat64WKP   = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
)

// special returns the most specific registry entry containing a.
func special(a netip.Addr) (SpecialPurpose, bool) {
	var best SpecialPurpose
	found := false
	for _, e := range specialPurpose {
		if e.Prefix.Contains(a) && (!found || e.Prefix.Bits() > best.Prefix.Bits()) {
			best, found = e, true
		}
	}
	return best, found
}

// NonPublic returns why a is not an address a service probing on behalf of
// others may connect to, or "" if it may.
//
// The rule, with IANA's registries as the source of truth:
//
//   - An address in any entry of the IPv4 or IPv6 Special-Purpose Address
//     Registry is refused, under the name of the most specific entry. That
//     includes the entries marked globally reachable: they are anycast
//     service addresses (PCP, TURN, DNS-SD registration, AMT relays, AS112
//     sinks), answered by the nearest instance, which is often the local
//     network's or the operator's own, or identifiers that are not locators
//     (ORCHIDv2, DETs). No site to check lives there.
//   - The exceptions are the blocks that carry an IPv4 destination, judged
//     by that IPv4 address under these same rules: IPv4-mapped addresses
//     (::ffff:a.b.c.d, which the socket API uses for IPv4 itself), the NAT64
//     well-known prefix 64:ff9b::/96 (RFC 6052; on an IPv6-only network it
//     reaches IPv4 hosts, internal ones included), 6to4 2002::/16 (the
//     IPv4 address in bits 16-47) and Teredo 2001::/32 (the server's IPv4
//     address and the client's, which RFC 4380 stores inverted). Each is
//     allowed only if every IPv4 address it carries is.
//   - The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) is refused whole:
//     where it carries the IPv4 address is the operator's choice, so the
//     address cannot be judged, and its only use is internal translation.
//   - IPv4 multicast (224.0.0.0/4) is refused, and so is any IPv6 address
//     outside 2000::/3, the only block IANA's IPv6 Address Space registry
//     allocates as global unicast: multicast (ff00::/8), the deprecated
//     site-local fec0::/10 and IPv4-compatible ::/96, and every reserved
//     block.
func NonPublic(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Zone() != "" {
		a = a.WithZone("")
	}
	if a.Is4() {
		if e, ok := special(a); ok {
			return e.Name
		}
		if multicast4.Contains(a) {
			return "Multicast"
		}
		return ""
	}
	switch {
	case nat64WKP.Contains(a):
		return embedded("NAT64 64:ff9b::/96", lastIPv4(a))
	case sixToFour.Contains(a):
		b := a.As16()
		return embedded("6to4", netip.AddrFrom4([4]byte(b[2:6])))
	case teredo.Contains(a):
		b := a.As16()
		var client [4]byte
		binary.BigEndian.PutUint32(client[:], ^binary.BigEndian.Uint32(b[12:16]))
		return embedded("TEREDO", netip.AddrFrom4([4]byte(b[4:8])), netip.AddrFrom4(client))
	case nat64Local.Contains(a):
		return "IPv4-IPv6 Translat. (local-use)"
	}
	if e, ok := special(a); ok {
		return e.Name
	}
	switch {
	case multicast6.Contains(a):
		return "Multicast"
	case siteLocal.Contains(a):
		return "Site-Local (deprecated)"
	case compatible.Contains(a):
		return "IPv4-compatible (deprecated)"
	case !unicast6.Contains(a):
		return "Reserved by IETF (outside Global Unicast 2000::/3)"
	}
	return ""
}

// embedded judges a transition address by the IPv4 addresses it carries.
func embedded(block string, v4 ...netip.Addr) string {
	for _, a := range v4 {
		if r := NonPublic(a); r != "" {
			return block + " to " + r
		}
	}
	return ""
}

func lastIPv4(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:16]))
}
