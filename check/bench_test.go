package check

import (
	"context"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// BenchmarkLocalCacheHit measures a verdict answered from the local cache,
// in process: the seed paper's "local cache hit" row (108 ms, for a client
// that reloaded its SQLite cache on every run). Target: at most 1 ms.
//
//	go test -run '^$' -bench LocalCacheHit ./check
func BenchmarkLocalCacheHit(b *testing.B) {
	w := newWorld(b, 0)
	ctx := context.Background()
	c := newChecker(b, w.config(b, w.honest))
	fp := probe.ColonHex(sha1Of(w.bank.Leaf().Cert.Raw))
	if ok, _, err := c.Converge(ctx, "bank.test", 443, fp); !ok || err != nil {
		b.Fatalf("warming the cache: %v %v", ok, err)
	}
	b.Run("Converge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ok, v, err := c.Converge(ctx, "bank.test", 443, fp)
			if !ok || err != nil || !v.FromCache {
				b.Fatal("not a cache hit", err)
			}
		}
	})
	// Check includes the client's own TLS handshake with the site.
	b.Run("Check", func(b *testing.B) {
		if v, err := c.Check(ctx, target("bank.test")); err != nil || v.Result != Trusted {
			b.Fatal(err)
		}
		var probeTotal time.Duration
		for b.Loop() {
			v, err := c.Check(ctx, target("bank.test"))
			if err != nil || !v.FromCache {
				b.Fatal("not a cache hit", err)
			}
			probeTotal += v.Timings.Probe
		}
		b.ReportMetric(float64(probeTotal.Microseconds())/float64(b.N), "probe-µs/op")
	})
}

// BenchmarkNotaryRound measures a verdict from three notaries that have the
// site in their history (the seed's "notary cache hit"), without a local
// cache, at loopback, continental (50 ms RTT) and global (150 ms RTT)
// distance. A long-lived Checker reuses its notary connections, so after
// the first round each query costs one round trip.
//
//	go test -run '^$' -bench NotaryRound ./check
func BenchmarkNotaryRound(b *testing.B) {
	for _, d := range []struct {
		name string
		rtt  time.Duration
	}{{"loopback", 0}, {"continental", testbed.ContinentalRTT}, {"global", testbed.GlobalRTT}} {
		b.Run(d.name, func(b *testing.B) {
			w := newWorld(b, 0)
			ctx := context.Background()
			// Put every notary at the distance.
			cfg := w.config(b, w.honest)
			cfg.CachePath = ""
			if d.rtt > 0 {
				cfg.Notaries = nil
				for i, n := range w.notaries {
					p, err := testbed.StartDelayProxy(n.Direct.String(), d.rtt)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { p.Close() })
					bb := *w.bundles[i]
					bb.Hosts = append([]Host(nil), bb.Hosts...)
					bb.Hosts[0].Host, bb.Hosts[0].SSLPort = p.Addr.Addr().String(), int(p.Addr.Port())
					cfg.Notaries = append(cfg.Notaries, &bb)
				}
			}
			c := newChecker(b, cfg)
			fp := probe.ColonHex(sha1Of(w.bank.Leaf().Cert.Raw))
			if ok, v, err := c.Converge(ctx, "bank.test", 443, fp); !ok || err != nil {
				b.Fatalf("warming the notaries: %v %v %v", ok, v, err)
			}
			for b.Loop() {
				ok, v, err := c.Converge(ctx, "bank.test", 443, fp)
				if !ok || err != nil || v.FromCache {
					b.Fatal("not a notary round", err)
				}
			}
		})
	}
}
