package pec

import (
	"github.com/pkie/pkie/internal/httplimit"

	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestListenerClientKey checks that the per-client forwarding limit groups
// clients as the forwarder and the cloud do: IPv4 by address (mapped ones
// too), IPv6 by /64.
func TestListenerClientKey(t *testing.T) {
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	for _, tc := range []struct {
		a, b net.Addr
		same bool
	}{
		{tcp("[2001:db8:1:2:aaaa::1]:443"), tcp("[2001:db8:1:2:ffff:ffff:ffff:fffe]:1234"), true},
		{tcp("[2001:db8:1:2::1]:443"), tcp("[2001:db8:1:3::1]:443"), false},
		{tcp("192.0.2.1:443"), tcp("[::ffff:192.0.2.1]:555"), true},
		{tcp("192.0.2.1:443"), tcp("192.0.2.2:443"), false},
		{tcp("[::1]:1"), &net.UDPAddr{IP: net.ParseIP("::1"), Port: 2}, true},
	} {
		ka, kb := httplimit.ClientName(tc.a), httplimit.ClientName(tc.b)
		if (ka == kb) != tc.same {
			t.Errorf("httplimit.ClientName(%v) = %q, httplimit.ClientName(%v) = %q: same %v, want %v", tc.a, ka, tc.b, kb, ka == kb, tc.same)
		}
	}
	if got := httplimit.ClientName(tcp("[::ffff:192.0.2.1]:1")); got != "192.0.2.1" {
		t.Errorf("IPv4-mapped key %q, want 192.0.2.1", got)
	}
	if got := httplimit.ClientName(tcp("[2001:db8:1:2:3:4:5:6]:1")); got != "2001:db8:1:2::/64" {
		t.Errorf("IPv6 key %q, want 2001:db8:1:2::/64", got)
	}
}

// TestListenerPerClientLimitSharedBySlash64 checks that a client rotating
// through the addresses of its /64 draws on one bucket.
func TestListenerPerClientLimitSharedBySlash64(t *testing.T) {
	bm := newBucketMap(0.001, 3, maxTracked)
	now := time.Now()
	var granted int
	for i := range 10 {
		a := &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("2001:db8:0:7::%x", i+1)), Port: 443}
		if bm.take(httplimit.ClientName(a), now) {
			granted++
		}
	}
	if granted != 3 {
		t.Errorf("10 addresses in one /64 were granted %d forwards, want the burst of 3", granted)
	}
	if n, _ := bm.size(); n != 1 {
		t.Errorf("%d buckets for one /64, want 1", n)
	}
}

// TestListenerBucketMapBounded floods the per-client limiter with distinct
// clients: it holds at most its capacity, each new client beyond it costs
// exactly one eviction (the least recently used), and a client in steady
// use keeps its (drained) bucket through the flood.
func TestListenerBucketMapBounded(t *testing.T) {
	const capacity, flood = 64, 10000
	bm := newBucketMap(0.001, 2, capacity)
	now := time.Now()
	busy := "2001:db8:ffff:ffff::/64"
	for bm.take(busy, now) {
	}
	for i := range flood {
		if !bm.take(fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff), now) {
			t.Fatalf("new client %d refused", i)
		}
		if i%(capacity/2) == 0 && bm.take(busy, now) {
			t.Fatalf("after %d new clients, the drained client was forwarded again: its bucket was evicted", i)
		}
		if n, _ := bm.size(); n > capacity {
			t.Fatalf("after %d new clients %d tracked, capacity %d", i, n, capacity)
		}
	}
	n, ev := bm.size()
	if n != capacity || ev != flood+1-capacity {
		t.Errorf("tracked %d, evictions %d; want %d and %d (one per new client beyond capacity)", n, ev, capacity, flood+1-capacity)
	}
}
