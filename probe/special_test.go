package probe_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/pkie/pkie/probe"
)

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// TestSpecialPurposeRegistry checks that the first and last address of every
// entry of IANA's IPv4 and IPv6 Special-Purpose Address Registries is
// refused, whatever its "Globally Reachable" column says (see NonPublic for
// why the globally reachable ones are refused too).
func TestSpecialPurposeRegistry(t *testing.T) {
	reg := probe.SpecialPurposeRegistry()
	var v4, v6 int
	for _, e := range reg {
		if e.Prefix.Addr().Is4() {
			v4++
		} else {
			v6++
		}
		if e.Name == "" || e.RFC == "" || e.Prefix != e.Prefix.Masked() {
			t.Errorf("malformed entry %+v", e)
		}
		for _, a := range []netip.Addr{e.Prefix.Addr(), lastAddr(e.Prefix)} {
			if r := probe.NonPublic(a); r == "" {
				t.Errorf("%s (first or last of %s %q, globally reachable %s) is allowed", a, e.Prefix, e.Name, e.GloballyReachable)
			}
		}
	}
	// 25 IPv4 entries (192.0.0.170/32 and 192.0.0.171/32 are one entry in
	// the registry, two here) and 25 IPv6 entries as of 2025-10-09.
	if v4 != 26 || v6 != 25 {
		t.Errorf("%d IPv4 and %d IPv6 entries; the registries have 26 and 25", v4, v6)
	}
}

// TestNonPublic names the reason for addresses in and just outside every
// registry entry and every other refused block, and for IPv4 addresses
// carried in IPv6 ones.
func TestNonPublic(t *testing.T) {
	const (
		pa  = "IETF Protocol Assignments"
		rsv = "Reserved by IETF (outside Global Unicast 2000::/3)"
	)
	tests := []struct{ addr, want string }{
		{"8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"invalid", "invalid"},

		// IPv4 registry entries: inside, and the neighbours outside.
		{"0.0.0.0", `"This host on this network"`},
		{"0.0.0.1", `"This network"`},
		{"0.255.255.255", `"This network"`},
		{"1.0.0.0", ""},
		{"9.255.255.255", ""},
		{"10.1.2.3", "Private-Use"},
		{"11.0.0.0", ""},
		{"100.63.255.255", ""},
		{"100.64.0.1", "Shared Address Space"},
		{"100.127.255.255", "Shared Address Space"},
		{"100.128.0.0", ""},
		{"126.255.255.255", ""},
		{"127.0.0.1", "Loopback"},
		{"127.8.9.10", "Loopback"},
		{"128.0.0.0", ""},
		{"169.253.255.255", ""},
		{"169.254.169.254", "Link Local"},
		{"169.255.0.0", ""},
		{"172.15.255.255", ""},
		{"172.16.0.1", "Private-Use"},
		{"172.31.255.255", "Private-Use"},
		{"172.32.0.0", ""},
		{"191.255.255.255", ""},
		{"192.0.0.0", "IPv4 Service Continuity Prefix"},
		{"192.0.0.7", "IPv4 Service Continuity Prefix"},
		{"192.0.0.8", "IPv4 dummy address"},
		{"192.0.0.9", "Port Control Protocol Anycast"},
		{"192.0.0.10", "Traversal Using Relays around NAT Anycast"},
		{"192.0.0.11", pa},
		{"192.0.0.169", pa},
		{"192.0.0.170", "NAT64/DNS64 Discovery"},
		{"192.0.0.171", "NAT64/DNS64 Discovery"},
		{"192.0.0.172", pa},
		{"192.0.0.255", pa},
		{"192.0.1.0", ""},
		{"192.0.1.255", ""},
		{"192.0.2.1", "Documentation (TEST-NET-1)"},
		{"192.0.3.0", ""},
		{"192.31.195.255", ""},
		{"192.31.196.1", "AS112-v4"},
		{"192.31.197.0", ""},
		{"192.52.192.255", ""},
		{"192.52.193.1", "AMT"},
		{"192.52.194.0", ""},
		{"192.88.98.255", ""},
		{"192.88.99.1", "Deprecated (6to4 Relay Anycast)"},
		{"192.88.99.2", "6a44-relay anycast address"},
		{"192.88.99.3", "Deprecated (6to4 Relay Anycast)"},
		{"192.88.100.0", ""},
		{"192.167.255.255", ""},
		{"192.168.1.1", "Private-Use"},
		{"192.169.0.0", ""},
		{"192.175.47.255", ""},
		{"192.175.48.1", "Direct Delegation AS112 Service"},
		{"192.175.49.0", ""},
		{"198.17.255.255", ""},
		{"198.18.0.0", "Benchmarking"},
		{"198.19.255.255", "Benchmarking"},
		{"198.20.0.0", ""},
		{"198.51.99.255", ""},
		{"198.51.100.7", "Documentation (TEST-NET-2)"},
		{"198.51.101.0", ""},
		{"203.0.112.255", ""},
		{"203.0.113.7", "Documentation (TEST-NET-3)"},
		{"203.0.114.0", ""},
		{"223.255.255.255", ""},
		{"224.0.0.1", "Multicast"},
		{"239.255.255.255", "Multicast"},
		{"240.0.0.0", "Reserved"},
		{"255.255.255.254", "Reserved"},
		{"255.255.255.255", "Limited Broadcast"},

		// IPv6 registry entries.
		{"::", "Unspecified Address"},
		{"::1", "Loopback Address"},
		{"::2", "IPv4-compatible (deprecated)"},
		{"ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rsv},
		{"fe80::1%eth0", "Link-Local Unicast"},
		{"::ffff:0:0", `"This host on this network"`}, // mapped: judged as 0.0.0.0
		{"::fffe:ffff:ffff", rsv},
		{"::ffff:ffff", "IPv4-compatible (deprecated)"},
		{"::1:0:0:0", rsv},
		{"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", rsv},
		{"64:ff9b::1:0:0", rsv},
		{"64:ff9b:0:ffff:ffff:ffff:ffff:ffff", rsv},
		{"64:ff9b:1::", "IPv4-IPv6 Translat. (local-use)"},
		{"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "IPv4-IPv6 Translat. (local-use)"},
		{"64:ff9b:2::", rsv},
		{"100::", "Discard-Only Address Block"},
		{"100::ffff:ffff:ffff:ffff", "Discard-Only Address Block"},
		{"100:0:0:1::", "Dummy IPv6 Prefix"},
		{"100:0:0:2::", rsv},
		{"2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001:1::", pa},
		{"2001:1::1", "Port Control Protocol Anycast"},
		{"2001:1::2", "Traversal Using Relays around NAT Anycast"},
		{"2001:1::3", "DNS-SD Service Registration Protocol Anycast"},
		{"2001:1::4", pa},
		{"2001:2::1", "Benchmarking"},
		{"2001:2:1::", pa},
		{"2001:3::1", "AMT"},
		{"2001:4::", pa},
		{"2001:4:111:ffff:ffff:ffff:ffff:ffff", pa},
		{"2001:4:112::1", "AS112-v6"},
		{"2001:4:113::", pa},
		{"2001:f:ffff:ffff:ffff:ffff:ffff:ffff", pa},
		{"2001:10::1", "Deprecated (previously ORCHID)"},
		{"2001:20::1", "ORCHIDv2"},
		{"2001:30::1", "Drone Remote ID Protocol Entity Tags (DETs) Prefix"},
		{"2001:40::", pa},
		{"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", pa},
		{"2001:200::", ""},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001:db8::1", "Documentation"},
		{"2001:db9::", ""},
		{"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2003::", ""},
		{"2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2620:4f:8000::6", "Direct Delegation AS112 Service"},
		{"2620:4f:8001::", ""},
		{"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"3fff::1", "Documentation"},
		{"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "Documentation"},
		{"3fff:1000::", ""},
		{"4000::", rsv},
		{"5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rsv},
		{"5f00::1", "Segment Routing (SRv6) SIDs"},
		{"5f01::", rsv},
		{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rsv},
		{"fc00::1", "Unique-Local"},
		{"fd00::1", "Unique-Local"},
		{"fe00::", rsv},
		{"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rsv},
		{"fe80::1", "Link-Local Unicast"},
		{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "Link-Local Unicast"},
		{"fec0::1", "Site-Local (deprecated)"},
		{"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "Site-Local (deprecated)"},
		{"ff00::", "Multicast"},
		{"ff02::1", "Multicast"},
		{"ff0e::1", "Multicast"},

		// IPv4 carried in IPv6.
		{"::ffff:8.8.8.8", ""},
		{"::ffff:127.0.0.1", "Loopback"},
		{"::ffff:10.0.0.1", "Private-Use"},
		{"::ffff:198.18.0.1", "Benchmarking"},
		{"::8.8.8.8", "IPv4-compatible (deprecated)"},
		{"::127.0.0.1", "IPv4-compatible (deprecated)"},
		{"::169.254.169.254", "IPv4-compatible (deprecated)"},
		{"64:ff9b::8.8.8.8", ""},
		{"64:ff9b::", "NAT64 64:ff9b::/96 to \"This host on this network\""},
		{"64:ff9b::10.0.0.1", "NAT64 64:ff9b::/96 to Private-Use"},
		{"64:ff9b::127.0.0.1", "NAT64 64:ff9b::/96 to Loopback"},
		{"64:ff9b::169.254.169.254", "NAT64 64:ff9b::/96 to Link Local"},
		{"64:ff9b::192.0.0.9", "NAT64 64:ff9b::/96 to Port Control Protocol Anycast"},
		{"64:ff9b::203.0.113.1", "NAT64 64:ff9b::/96 to Documentation (TEST-NET-3)"},
		{"64:ff9b::255.255.255.255", "NAT64 64:ff9b::/96 to Limited Broadcast"},
		{"64:ff9b:1::8.8.8.8", "IPv4-IPv6 Translat. (local-use)"},
		{"64:ff9b:1:a00:1::", "IPv4-IPv6 Translat. (local-use)"},
		{"2002:808:808::1", ""},
		{"2002::", "6to4 to \"This host on this network\""},
		{"2002:a00:1::1", "6to4 to Private-Use"},
		{"2002:7f00:1:ffff:ffff:ffff:ffff:ffff", "6to4 to Loopback"},
		{"2002:c0a8:101::", "6to4 to Private-Use"},
		{"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "6to4 to Limited Broadcast"},
		// Teredo: server 65.54.227.120 (4136:e378); the client's address is
		// stored inverted (RFC 4380 §4): f7f7:f7f7 is 8.8.8.8, 3fff:fdd2 the
		// RFC's own example 192.0.2.45, f5ff:fffe is 10.0.0.1, 80ff:fffe is
		// 127.0.0.1.
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", ""},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "TEREDO to Documentation (TEST-NET-1)"},
		{"2001:0:4136:e378::f5ff:fffe", "TEREDO to Private-Use"},
		{"2001:0:4136:e378::80ff:fffe", "TEREDO to Loopback"},
		{"2001:0:a00:1::f7f7:f7f7", "TEREDO to Private-Use"},                    // the server's address
		{"2001:0:4136:e378::a00:1", "TEREDO to Reserved"},                       // 10.0.0.1 not inverted is 245.255.255.254
		{"2001::", "TEREDO to \"This host on this network\""},                   // first address
		{"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "TEREDO to Limited Broadcast"}, // last address
	}
	for _, tc := range tests {
		a, err := netip.ParseAddr(tc.addr)
		if err != nil && tc.addr != "invalid" {
			t.Fatalf("%s: %v", tc.addr, err)
		}
		if got := probe.NonPublic(a); got != tc.want {
			t.Errorf("NonPublic(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// TestForbiddenAddressError checks that the guard's error matches
// ErrForbiddenAddress and carries the address beside its text, not in it.
func TestForbiddenAddressError(t *testing.T) {
	for _, ip := range []string{"10.0.0.1", "fd00::1", "::ffff:192.168.1.1"} {
		_, err := probe.New(probe.Options{}).Probe(context.Background(), probe.Target{Host: "x.test", Port: 443, IP: netip.MustParseAddr(ip)})
		if !errors.Is(err, probe.ErrForbiddenAddress) {
			t.Fatalf("%s: err = %v, want ErrForbiddenAddress", ip, err)
		}
		var fe *probe.ForbiddenAddressError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: err %T is not a *ForbiddenAddressError", ip, err)
		}
		want := netip.MustParseAddr(ip).Unmap()
		if fe.Addr != want || fe.Reason != probe.NonPublic(want) {
			t.Errorf("%s: error carries %s (%q)", ip, fe.Addr, fe.Reason)
		}
		if msg := err.Error(); strings.Contains(msg, want.String()) || !strings.Contains(msg, "not public") {
			t.Errorf("%s: error text %q names the address or does not say it is not public", ip, msg)
		}
	}
}

// FuzzNonPublic cross-checks the guard with the standard library's
// classification: nothing it allows may be loopback, private, link-local,
// multicast or unspecified, and an IPv4-mapped address is judged as the
// IPv4 address it maps.
func FuzzNonPublic(f *testing.F) {
	for _, s := range []string{"8.8.8.8", "::ffff:10.0.0.1", "64:ff9b::a00:1", "2002:a00:1::", "2001:0:4136:e378::f5ff:fffe", "fe80::1", "2606:4700::1111"} {
		b := netip.MustParseAddr(s).As16()
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		r := probe.NonPublic(a)
		u := a.Unmap()
		if r == "" && (u.IsLoopback() || u.IsPrivate() || u.IsLinkLocalUnicast() || u.IsLinkLocalMulticast() ||
			u.IsMulticast() || u.IsInterfaceLocalMulticast() || u.IsUnspecified() || !u.IsGlobalUnicast()) {
			t.Fatalf("NonPublic(%s) allows an address the standard library calls non-public", a)
		}
		if a.Is4In6() && r != probe.NonPublic(u) {
			t.Fatalf("NonPublic(%s) = %q but NonPublic(%s) = %q", a, r, u, probe.NonPublic(u))
		}
	})
}
