package synth

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// sliceReader yields fixed flows.
type sliceReader struct {
	flows []replay.Flow
	i     int
}

func (r *sliceReader) Next() (replay.Flow, error) {
	if r.i >= len(r.flows) {
		return replay.Flow{}, io.EOF
	}
	r.i++
	return r.flows[r.i-1], nil
}

func (r *sliceReader) Stats() replay.Stats { return replay.Stats{Read: int64(r.i), Kept: int64(r.i)} }

var t0 = time.Date(2013, 4, 21, 12, 0, 0, 0, time.UTC)

// fl is a flow at t0+sec seconds from client 10.0.0.c to sni:443.
func fl(sec float64, c int, sni string) replay.Flow {
	return replay.Flow{
		Start:      t0.Add(time.Duration(sec * float64(time.Second))),
		Client:     netip.AddrFrom4([4]byte{10, 0, 0, byte(c)}),
		Server:     netip.MustParseAddr("192.0.2.1"),
		Port:       443,
		ServerName: sni,
		PacketsOut: 1, PacketsIn: 1,
	}
}

// silent makes f a connection attempt nobody answered: SYNs out, nothing
// back.
func silent(f replay.Flow) replay.Flow {
	f.PacketsOut, f.PacketsIn = 3, 0
	return f
}

// uncounted makes f a flow whose format counted no packets.
func uncounted(f replay.Flow) replay.Flow {
	f.PacketsOut, f.PacketsIn = 0, 0
	return f
}

// req is a request as the test tables write it: offset seconds, client,
// host.
type req struct {
	t      float64
	client int
	host   string
}

type schedule struct {
	header  replay.ScheduleHeader
	reqs    []req
	targets []replay.Target
	sum     *replay.ScheduleSummary
}

// synthesize runs cfg over flows and reads the schedule back with
// replay's own reader, so every schedule a test sees is a valid one.
func synthesize(t *testing.T, cfg Config, flows []replay.Flow) (schedule, Result) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	res, err := s.Run(context.Background(), &sliceReader{flows: flows}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := replay.NewScheduleReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	out := schedule{header: sr.Header}
	for {
		r, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out.reqs = append(out.reqs, req{r.T.Seconds(), int(r.Client.As4()[3]), r.Host})
	}
	out.targets, out.sum, err = sr.Rest()
	if err != nil {
		t.Fatal(err)
	}
	return out, res
}

func TestClientCache(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lifetime time.Duration
		max      int
		counts   Counts
		flows    []replay.Flow
		want     []req
		hits     int64
		evicted  int64
	}{{
		name: "whole trace, as the paper",
		flows: []replay.Flow{
			fl(0, 1, "a.example"), fl(1, 1, "a.example"), fl(2, 2, "a.example"),
			fl(3, 1, "b.example"), fl(3600, 1, "a.example"), fl(3601, 2, "b.example"),
		},
		want: []req{{0, 1, "a.example"}, {2, 2, "a.example"}, {3, 1, "b.example"}, {3601, 2, "b.example"}},
		hits: 2,
	}, {
		// Lifetime 10 s from the request: the hit at 9 does not extend
		// it, so 10 asks again, and 19 is within the refilled entry.
		name:     "lifetime from the request",
		lifetime: 10 * time.Second,
		flows: []replay.Flow{
			fl(0, 1, "a.example"), fl(9, 1, "a.example"), fl(10, 1, "a.example"),
			fl(19, 1, "a.example"), fl(20, 1, "a.example"), fl(25, 2, "a.example"),
		},
		want: []req{{0, 1, "a.example"}, {10, 1, "a.example"}, {20, 1, "a.example"}, {25, 2, "a.example"}},
		hits: 2,
	}, {
		// Two entries. c at 3 evicts b (a was used at 2); b at 4 evicts
		// a; c at 5 hits; a at 6 evicts b.
		name: "LRU bound",
		max:  2,
		flows: []replay.Flow{
			fl(0, 1, "a.example"), fl(1, 1, "b.example"), fl(2, 1, "a.example"),
			fl(3, 1, "c.example"), fl(4, 1, "b.example"), fl(5, 1, "c.example"), fl(6, 1, "a.example"),
		},
		want:    []req{{0, 1, "a.example"}, {1, 1, "b.example"}, {3, 1, "c.example"}, {4, 1, "b.example"}, {6, 1, "a.example"}},
		hits:    2,
		evicted: 3,
	}, {
		// An expired entry dropped for room is not an eviction.
		name:     "expired entries leave without counting",
		lifetime: 5 * time.Second,
		max:      1,
		flows:    []replay.Flow{fl(0, 1, "a.example"), fl(6, 1, "b.example"), fl(7, 1, "a.example")},
		want:     []req{{0, 1, "a.example"}, {6, 1, "b.example"}, {7, 1, "a.example"}},
		evicted:  1,
	}, {
		name: "the port is part of the pair",
		flows: func() []replay.Flow {
			a, b := fl(0, 1, "a.example"), fl(1, 1, "a.example")
			b.Port = 8443
			return []replay.Flow{a, b, fl(2, 1, "a.example")}
		}(),
		want: []req{{0, 1, "a.example"}, {1, 1, "a.example"}},
		hits: 1,
	}, {
		// Failed requests cannot be cached (Forced Perspectives, Table
		// 2): client 1's SYN-only flows to d at 1 and 2 each ask again;
		// the answered one at 3 asks and fills the entry, so 4 (answered)
		// and 5 (unanswered this time) are hits. Client 2 is apart.
		name: "unanswered flows do not fill the cache",
		flows: []replay.Flow{
			fl(0, 1, "a.example"), silent(fl(1, 1, "d.example")), silent(fl(2, 1, "d.example")),
			fl(3, 1, "d.example"), fl(4, 1, "d.example"), silent(fl(5, 1, "d.example")), silent(fl(6, 2, "d.example")),
		},
		want: []req{{0, 1, "a.example"}, {1, 1, "d.example"}, {2, 1, "d.example"}, {3, 1, "d.example"}, {6, 2, "d.example"}},
		hits: 2,
	}, {
		// Declared both ways: no flow with packets back is needed.
		name:   "unanswered, trace declared to count both ways",
		counts: CountsBothWays,
		flows:  []replay.Flow{silent(fl(1, 1, "d.example")), silent(fl(2, 1, "d.example"))},
		want:   []req{{0, 1, "d.example"}, {1, 1, "d.example"}},
	}, {
		// One-way netflow cannot tell an unanswered flow from an
		// answered one: every flow fills the cache, as the paper's did.
		name:   "one-way trace: every flow fills the cache",
		counts: CountsOneWay,
		flows:  []replay.Flow{fl(0, 1, "a.example"), silent(fl(1, 1, "d.example")), silent(fl(2, 1, "d.example"))},
		want:   []req{{0, 1, "a.example"}, {1, 1, "d.example"}},
		hits:   1,
	}, {
		// Auto, and no flow had a packet back: the trace is taken as
		// one-way.
		name:  "auto without any answered flow: every flow fills the cache",
		flows: []replay.Flow{silent(fl(1, 1, "d.example")), silent(fl(2, 1, "d.example"))},
		want:  []req{{0, 1, "d.example"}},
		hits:  1,
	}, {
		// A flow that counted no packets either way says nothing: it
		// fills the cache.
		name:  "uncounted flows fill the cache",
		flows: []replay.Flow{fl(0, 1, "a.example"), uncounted(fl(1, 1, "u.example")), uncounted(fl(2, 1, "u.example"))},
		want:  []req{{0, 1, "a.example"}, {1, 1, "u.example"}},
		hits:  1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Naming: []string{MethodSNI}, CacheLifetime: tc.lifetime, CacheMax: tc.max, Counts: tc.counts}
			sch, res := synthesize(t, cfg, tc.flows)
			if !reflect.DeepEqual(sch.reqs, tc.want) {
				t.Errorf("requests %v, want %v", sch.reqs, tc.want)
			}
			if res.ClientCacheHits != tc.hits || res.CacheEvicted != tc.evicted || res.Requests != int64(len(tc.want)) {
				t.Errorf("hits %d evicted %d requests %d, want %d %d %d", res.ClientCacheHits, res.CacheEvicted, res.Requests, tc.hits, tc.evicted, len(tc.want))
			}
			if sch.sum.ClientCacheHits != tc.hits || sch.header.CacheLifetime != tc.lifetime {
				t.Errorf("written summary %+v header %+v", sch.sum, sch.header)
			}
		})
	}
}
