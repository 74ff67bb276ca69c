package synth

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/replay/gen"
)

// benchTrace is an in-memory JSON-lines trace of n flows over an hour:
// 2,000 clients, 5,000 servers of Zipf-like popularity, half the flows
// with SNI and a map naming half the servers, flows slightly out of
// order as readers emit them.
func benchTrace(b *testing.B, n int) ([]byte, Map) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, 4999)
	m := Map{}
	for i := range 5000 {
		if i%2 == 0 {
			m[netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)})] = fmt.Sprintf("host%d.example.com", i)
		}
	}
	var buf bytes.Buffer
	w := replay.NewJSONLWriter(&buf)
	t0 := time.Date(2013, 4, 21, 12, 0, 0, 0, time.UTC)
	for i := range n {
		s := int(zipf.Uint64())
		f := replay.Flow{
			Start:      t0.Add(time.Duration(i)*time.Hour/time.Duration(n) - time.Duration(rng.IntN(2000))*time.Millisecond),
			Duration:   time.Duration(rng.IntN(30000)) * time.Millisecond,
			Client:     netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(8)), byte(rng.IntN(250))}),
			Server:     netip.AddrFrom4([4]byte{192, 0, byte(s >> 8), byte(s)}),
			Port:       443,
			BytesOut:   uint64(rng.IntN(20000)),
			BytesIn:    uint64(rng.IntN(700000)),
			PacketsOut: 10, PacketsIn: 12,
		}
		if rng.IntN(2) == 0 {
			f.ServerName = fmt.Sprintf("host%d.example.com", s)
		}
		w.Write(f)
	}
	w.Flush()
	return buf.Bytes(), m
}

const benchFlows = 100_000

// BenchmarkReadOnly is the ceiling: reading the trace and nothing else.
func BenchmarkReadOnly(b *testing.B) {
	trace, _ := benchTrace(b, benchFlows)
	b.SetBytes(int64(len(trace)))
	b.ResetTimer()
	for b.Loop() {
		r := replay.NewJSONLReader(bytes.NewReader(trace))
		for {
			if _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*benchFlows)/b.Elapsed().Seconds(), "flows/s")
}

// BenchmarkSynth is reading, naming (SNI then map, compared), reordering,
// the client cache and writing the schedule.
func BenchmarkSynth(b *testing.B) {
	trace, m := benchTrace(b, benchFlows)
	b.SetBytes(int64(len(trace)))
	b.ResetTimer()
	for b.Loop() {
		s, err := New(Config{Naming: []string{MethodSNI, MethodMap}, Map: m, Compare: true})
		if err != nil {
			b.Fatal(err)
		}
		res, err := s.Run(context.Background(), replay.NewJSONLReader(bytes.NewReader(trace)), io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		if res.Flows != benchFlows || res.Requests == 0 {
			b.Fatalf("%+v", res.ScheduleSummary)
		}
	}
	b.ReportMetric(float64(b.N*benchFlows)/b.Elapsed().Seconds(), "flows/s")
}

// BenchmarkFormats measures each trace format the generator writes, read
// alone and synthesised (SNI then the generator's PTR records, compared;
// nfdump has no SNI, so only the PTR records name its flows), on 100,000
// flows of the paper's model held in memory. The pcap is the generator's
// capture (handshakes, ClientHellos, data packets cut to their headers),
// whose flows its reader returns as their connections end, not in order
// of start: synth's reorder window puts them back.
func BenchmarkFormats(b *testing.B) {
	o := gen.DefaultOptions()
	o.Flows, o.Duration = benchFlows, time.Hour*benchFlows/gen.PaperFlows
	for _, format := range []string{replay.FormatJSONL, replay.FormatNfdump, replay.FormatZeek, replay.FormatPCAP} {
		g, err := gen.New(o)
		if err != nil {
			b.Fatal(err)
		}
		var trace, ssl bytes.Buffer
		w, err := gen.NewWriter(format, &trace, &ssl)
		if err != nil {
			b.Fatal(err)
		}
		for {
			f, err := g.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			w.Write(f)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		open := func(b *testing.B) replay.Reader {
			opt := replay.Options{}
			if format == replay.FormatZeek {
				opt.ZeekSSL = bytes.NewReader(ssl.Bytes())
			}
			r, err := replay.Open(bytes.NewReader(trace.Bytes()), format, opt)
			if err != nil {
				b.Fatal(err)
			}
			return r
		}
		b.Run("read/"+format, func(b *testing.B) {
			b.SetBytes(int64(trace.Len() + ssl.Len()))
			for b.Loop() {
				r := open(b)
				n := 0
				for {
					if _, err := r.Next(); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != benchFlows {
					b.Fatalf("%d flows", n)
				}
			}
			b.ReportMetric(float64(b.N*benchFlows)/b.Elapsed().Seconds(), "flows/s")
		})
		b.Run("synth/"+format, func(b *testing.B) {
			b.SetBytes(int64(trace.Len() + ssl.Len()))
			for b.Loop() {
				s, err := New(Config{Naming: []string{MethodSNI, MethodRDNS}, RDNS: g, Dead: g, Compare: true})
				if err != nil {
					b.Fatal(err)
				}
				res, err := s.Run(context.Background(), open(b), io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				if res.Flows != benchFlows || res.Requests == 0 {
					b.Fatalf("%+v", res.ScheduleSummary)
				}
			}
			b.ReportMetric(float64(b.N*benchFlows)/b.Elapsed().Seconds(), "flows/s")
		})
	}
}
