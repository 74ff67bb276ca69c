package notarybench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// The Go benchmarks mirror "pkie bench notary": run them together so the
// ceilings come from the same run.
//
//	go test -run '^$' -bench . -benchtime 3s ./internal/notarybench

func benchEnv(b *testing.B) *env {
	b.Helper()
	e, err := newEnv()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.cleanup)
	return e
}

func startNotary(b *testing.B, e *env, cfg notary.Config) *testbed.Notary {
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "b", Path: e.path, Config: loopback(cfg, 64)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}

func BenchmarkNotaryCached(b *testing.B) {
	e := benchEnv(b)
	n := startNotary(b, e, notary.Config{})
	c := pinned(n.Identity.Cert, 64, true)
	if code, err := post(context.Background(), c, n.Addr, "site.test+443", e.fp); err != nil || code != 200 {
		b.Fatalf("warm-up: %d %v", code, err)
	}
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if code, err := post(context.Background(), c, n.Addr, "site.test+443", e.fp); err != nil || code != 200 {
				b.Errorf("%d %v", code, err)
				return
			}
		}
	})
}

func BenchmarkTrivialHTTPSCeiling(b *testing.B) {
	e := benchEnv(b)
	n := startNotary(b, e, notary.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := notary.NewServer(n.Identity, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Write([]byte(`{"ok":true}`))
	}))
	go srv.ServeTLS(ln, "", "")
	b.Cleanup(func() { srv.Close() })
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	c := pinned(n.Identity.Cert, 64, true)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := post(context.Background(), c, addr, "x+1", e.fp); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkNotaryUncached(b *testing.B) {
	e := benchEnv(b)
	for i := 0; i < 4096; i++ {
		e.path.Set(fmt.Sprintf("u%d.test", i), e.site.Addr)
	}
	n := startNotary(b, e, notary.Config{MaxAge: time.Nanosecond, MaxProbes: 256, MaxQueue: 1024})
	c := pinned(n.Identity.Cert, 64, true)
	var next atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) % 4096
			if code, err := post(context.Background(), c, n.Addr, fmt.Sprintf("u%d.test+443", i), e.fp); err != nil || code != 200 {
				b.Errorf("%d %v", code, err)
				return
			}
		}
	})
}

func BenchmarkRawTLSHandshakeCeiling(b *testing.B) {
	e := benchEnv(b)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			conn, err := tls.Dial("tcp", e.site.Addr.String(), &tls.Config{InsecureSkipVerify: true, ServerName: "site.test", CurvePreferences: probe.CurvePreferences()})
			if err != nil {
				b.Error(err)
				return
			}
			conn.Close()
		}
	})
}
