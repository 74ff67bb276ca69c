package obc

import (
	"path/filepath"
	"testing"
)

// The per-origin transports are bounded: past the bound the one used least
// recently is dropped, and an origin used again gets a new one.
func TestTransportBound(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "obc.db"), StoreOptions{})
	tt := Transport(nil, st).(*transport)
	tt.max = 2
	o := func(h string) Origin { return Origin{Scheme: "https", Host: h, Port: 443} }
	a := tt.forOrigin(o("a.test"))
	b := tt.forOrigin(o("b.test"))
	if tt.forOrigin(o("a.test")) != a {
		t.Fatal("a.test got a new transport while within the bound")
	}
	tt.forOrigin(o("c.test")) // drops b.test, used least recently
	if n := len(tt.byOrigin); n != 2 || tt.lru.Len() != 2 {
		t.Fatalf("%d transports held (list %d); the bound is 2", n, tt.lru.Len())
	}
	if tt.forOrigin(o("a.test")) != a {
		t.Fatal("a.test, used recently, was dropped")
	}
	if tt.forOrigin(o("b.test")) == b {
		t.Fatal("b.test kept its transport past the bound")
	}
}
