package check

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// BenchmarkLocalCacheHit measures a verdict answered from the local cache,
// in process: Forced Perspectives' "local cache hit" row (Table 4) (108 ms, for a client
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
// site in their history (Forced Perspectives' "notary cache hit"), without a local
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

// BenchmarkNotaryAPI compares a round of three loopback notaries (each
// answering from its history) over the Convergence API (SHA-1, RSA-2048
// signature) and the v1 API (SHA-256, Ed25519 signature, subject and
// freshness checks), with a long-lived Checker and no local cache.
// sig-µs/op is the client's signature checking summed over the three
// answers.
//
//	go test -run '^$' -bench NotaryAPI ./check
func BenchmarkNotaryAPI(b *testing.B) {
	w := newWorld(b, 0)
	ctx := context.Background()
	fp1 := probe.ColonHex(sha1Of(w.bank.Leaf().Cert.Raw))
	s := sha256.Sum256(w.bank.Leaf().Cert.Raw)
	fp256 := hex.EncodeToString(s[:])
	for _, api := range []API{APIConvergence, APIV1} {
		b.Run(string(api), func(b *testing.B) {
			cfg := w.config(b, w.honest)
			cfg.CachePath, cfg.API = "", api
			c := newChecker(b, cfg)
			round := func() *Verdict {
				var ok bool
				var v *Verdict
				var err error
				if api == APIV1 {
					ok, v, err = c.ConvergeSHA256(ctx, "bank.test", 443, "", fp256)
				} else {
					ok, v, err = c.Converge(ctx, "bank.test", 443, fp1)
				}
				if !ok || err != nil || v.Notaries[0].API != api {
					b.Fatalf("round over %s: %v %v %+v", api, ok, err, v)
				}
				return v
			}
			round() // the notaries' history and the connections
			var sig time.Duration
			for b.Loop() {
				sig += round().Timings.SignatureChecks
			}
			b.ReportMetric(float64(sig.Microseconds())/float64(b.N), "sig-µs/op")
		})
	}
}
