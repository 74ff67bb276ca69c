package sctworld

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/loglist"
)

// TestWorld starts a world of pkie logs and checks that each site serves
// what its case says: the SCTs where the case puts them.
func TestWorld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := New(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tests := []struct {
		site                string
		embedded, tls, ocsp bool
	}{
		{Good, true, false, false},
		{Spare, true, false, false},
		{Forged, true, false, false},
		{Unlisted, true, false, false},
		{OneSCT, true, false, false},
		{TLS, false, true, false},
		{OCSP, false, false, true},
		{NoSCT, false, false, false},
	}
	for _, tc := range tests {
		s := w.Site(tc.site)
		conn, err := tls.Dial("tcp", s.Addr.String(), &tls.Config{ServerName: tc.site, RootCAs: w.Root.Pool()})
		if err != nil {
			t.Fatalf("%s: %v", tc.site, err)
		}
		cs := conn.ConnectionState()
		conn.Close()
		hasExt := false
		for _, e := range cs.PeerCertificates[0].Extensions {
			if e.Id.Equal(OIDSCTList) {
				hasExt = true
			}
		}
		if hasExt != tc.embedded || (len(cs.SignedCertificateTimestamps) > 0) != tc.tls || (len(cs.OCSPResponse) > 0) != tc.ocsp {
			t.Errorf("%s: embedded %v, TLS SCTs %d, OCSP %d bytes; want embedded %v, tls %v, ocsp %v", tc.site,
				hasExt, len(cs.SignedCertificateTimestamps), len(cs.OCSPResponse), tc.embedded, tc.tls, tc.ocsp)
		}
	}
	if len(w.Logs) != 3 || !w.Logs[0].Listed || !w.Logs[1].Listed || w.Logs[2].Listed {
		t.Fatalf("logs %+v", w.Logs)
	}
}

// TestList reads the world's list back: the listed logs, by ID, with the
// origin their checkpoints carry.
func TestList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := New(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l, err := loglist.Parse(w.List)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Logs) != 2 {
		t.Fatalf("%d logs in the list, want 2", len(l.Logs))
	}
	for _, wl := range w.Logs {
		got := l.Lookup(wl.ID)
		if (got != nil) != wl.Listed {
			t.Fatalf("%s: in the list %v, listed %v", wl.Description, got != nil, wl.Listed)
		}
		if got != nil && (got.Origin() != wl.Origin || got.Operator != wl.Operator || got.State != loglist.Usable) {
			t.Errorf("%s: list says origin %q operator %q state %s; want %q %q usable", wl.Description, got.Origin(), got.Operator, got.State, wl.Origin, wl.Operator)
		}
	}
}
