package testbed

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func TestSynthWebServesItsTruth(t *testing.T) {
	w, err := StartSynthWeb(SynthWebOptions{Sites: 80, Roots: 4, Listeners: 2, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pool := x509.NewCertPool()
	for _, r := range w.Roots {
		pool.AddCert(r.Cert)
	}
	kinds := map[SiteKind]int{}
	for i, s := range w.Sites {
		kinds[s.Kind]++
		if s.Rank != i+1 {
			t.Fatalf("site %d has rank %d", i, s.Rank)
		}
		conn, err := tls.Dial("tcp", s.Addr.String(), &tls.Config{ServerName: s.Domain, InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("%s: %v", s.Domain, err)
		}
		certs := conn.ConnectionState().PeerCertificates
		conn.Close()
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		chains, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: s.Domain})
		if (err == nil) != (len(s.Anchors) > 0) {
			t.Errorf("%s (%s): verify error %v, truth anchors %v", s.Domain, s.Kind, err, s.Anchors)
		}
		if err == nil && len(chains) != len(s.Anchors) {
			t.Errorf("%s (%s): %d paths, truth %d anchors", s.Domain, s.Kind, len(chains), len(s.Anchors))
		}
	}
	for _, k := range []SiteKind{KindCrossSigned, KindSendRoot, KindLeafOnly, KindUntrusted, KindExpired} {
		if kinds[k] != 5 {
			t.Errorf("%d sites of kind %s, want 5", kinds[k], k)
		}
	}
	counts := w.RootSiteCounts()
	for i := 1; i < len(counts); i++ {
		if counts[i] > counts[0] {
			t.Errorf("root 0 should be the most popular: %v", counts)
		}
	}
	if _, err := tls.Dial("tcp", w.Listeners[0].String(), &tls.Config{ServerName: "unknown.test", InsecureSkipVerify: true}); err == nil {
		t.Error("unknown SNI: want a handshake failure")
	}
	if _, err := StartSynthWeb(SynthWebOptions{Sites: 10}); err == nil {
		t.Error("too few sites: want an error")
	}
}
