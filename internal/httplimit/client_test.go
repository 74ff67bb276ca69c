package httplimit

import (
	"net"
	"net/netip"
	"testing"
)

func TestClientKey(t *testing.T) {
	for _, tt := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, "192.0.2.7/32"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7/32"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 1}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::1"), Port: 1}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"}, "fe80::/64"},
		{&net.UDPAddr{IP: net.ParseIP("198.51.100.1"), Port: 9}, "198.51.100.1/32"},
		{&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}, "invalid Prefix"},
		{nil, "invalid Prefix"},
	} {
		if got := ClientKey(tt.addr).String(); got != tt.want {
			t.Errorf("ClientKey(%v) = %s, want %s", tt.addr, got, tt.want)
		}
	}
	for _, tt := range []struct{ remote, want string }{
		{"192.0.2.7:443", "192.0.2.7/32"},
		{"[2001:db8::1]:443", "2001:db8::/64"},
		{"[::ffff:10.0.0.1]:1", "10.0.0.1/32"},
		{"pipe", "invalid Prefix"},
		{"", "invalid Prefix"},
	} {
		if got := clientKeyString(tt.remote).String(); got != tt.want {
			t.Errorf("clientKeyString(%q) = %s, want %s", tt.remote, got, tt.want)
		}
	}
	if clientKeyString("pipe") != (netip.Prefix{}) {
		t.Error("a non-IP address must give the zero Prefix")
	}
}
