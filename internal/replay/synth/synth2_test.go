package synth

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// at is fl with a server address and no SNI unless given.
func at(sec float64, c int, server, sni string) replay.Flow {
	f := fl(sec, c, sni)
	f.Server = netip.MustParseAddr(server)
	return f
}

func TestNaming(t *testing.T) {
	m := Map{
		netip.MustParseAddr("192.0.2.1"): "mapped-a.example",
		netip.MustParseAddr("192.0.2.2"): "mapped-b.example",
	}
	rd := NewRDNSCache()
	rd.Put(netip.MustParseAddr("192.0.2.2"), RDNSEntry{Name: "ptr-b.example"})
	rd.Put(netip.MustParseAddr("192.0.2.3"), RDNSEntry{Name: "ptr-c.example"})
	rd.Put(netip.MustParseAddr("192.0.2.4"), RDNSEntry{}) // no PTR
	// 192.0.2.5 was never looked up (past --rdns-max).
	flows := []replay.Flow{
		at(0, 1, "192.0.2.1", "sni-a.example"), // SNI, map names the address
		at(1, 1, "192.0.2.2", ""),              // map and rdns both name it
		at(2, 1, "192.0.2.3", ""),              // rdns only
		at(3, 1, "192.0.2.4", "sni-d.example"), // SNI; rdns says no name: recovered
		at(4, 1, "192.0.2.4", ""),              // lost
		at(5, 1, "192.0.2.5", "sni-e.example"), // SNI; address unmeasured
		at(6, 1, "192.0.2.5", ""),              // lost
		at(7, 1, "192.0.2.3", "Bad Name"),      // SNI not a DNS name: rdns names it
	}
	for _, tc := range []struct {
		name    string
		naming  []string
		compare bool
		// hosts named per flow, then NamedSNI, NamedMap, NamedRDNS,
		// Unnamed, SNIRecovered, CompareUnmeasured.
		hosts  []string
		counts [6]int64
	}{{
		name:   "sni,map,rdns compared",
		naming: []string{"sni", "map", "rdns"}, compare: true,
		hosts:  []string{"sni-a.example", "mapped-b.example", "ptr-c.example", "sni-d.example", "", "sni-e.example", "", "ptr-c.example"},
		counts: [6]int64{3, 1, 2, 2, 1, 1},
	}, {
		name:   "sni,map,rdns not compared",
		naming: []string{"sni", "map", "rdns"},
		hosts:  []string{"sni-a.example", "mapped-b.example", "ptr-c.example", "sni-d.example", "", "sni-e.example", "", "ptr-c.example"},
		counts: [6]int64{3, 1, 2, 2, -1, 0},
	}, {
		name:   "rdns before map and sni",
		naming: []string{"rdns", "map", "sni"}, compare: true,
		hosts:  []string{"mapped-a.example", "ptr-b.example", "ptr-c.example", "sni-d.example", "", "sni-e.example", "", "ptr-c.example"},
		counts: [6]int64{2, 1, 3, 2, 1, 1},
	}, {
		name:   "the paper: reverse DNS alone",
		naming: []string{"rdns"}, compare: true,
		hosts:  []string{"", "ptr-b.example", "ptr-c.example", "", "", "", "", "ptr-c.example"},
		counts: [6]int64{0, 0, 3, 5, -1, 0},
	}, {
		name:   "sni alone",
		naming: []string{"sni"}, compare: true,
		hosts:  []string{"sni-a.example", "", "", "sni-d.example", "", "sni-e.example", "", ""},
		counts: [6]int64{3, 0, 0, 5, -1, 0},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Naming: tc.naming, Map: m, RDNS: rd, Compare: tc.compare}
			// Each flow from its own client, so each named one requests.
			fs := make([]replay.Flow, len(flows))
			copy(fs, flows)
			for i := range fs {
				fs[i].Client = netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
			}
			sch, res := synthesize(t, cfg, fs)
			var hosts []string
			j := 0
			for i := range fs {
				h := ""
				if j < len(sch.reqs) && sch.reqs[j].client == i+1 {
					h = sch.reqs[j].host
					j++
				}
				hosts = append(hosts, h)
			}
			if !reflect.DeepEqual(hosts, tc.hosts) {
				t.Errorf("hosts %q, want %q", hosts, tc.hosts)
			}
			got := [6]int64{res.NamedSNI, res.NamedMap, res.NamedRDNS, res.Unnamed, res.SNIRecovered, res.CompareUnmeasured}
			if got != tc.counts {
				t.Errorf("sni map rdns unnamed recovered unmeasured %v, want %v", got, tc.counts)
			}
			if sch.sum.SNIRecovered != tc.counts[4] || sch.sum.Unnamed != tc.counts[3] || !reflect.DeepEqual(sch.header.Naming, tc.naming) {
				t.Errorf("written summary %+v, header %+v", sch.sum, sch.header)
			}
		})
	}
}

func TestNeedsRDNS(t *testing.T) {
	m := Map{netip.MustParseAddr("192.0.2.1"): "mapped.example"}
	for _, tc := range []struct {
		naming  []string
		compare bool
		flow    replay.Flow
		want    bool
	}{
		{[]string{"sni", "rdns"}, false, at(0, 1, "192.0.2.9", "x.example"), false},
		{[]string{"sni", "rdns"}, true, at(0, 1, "192.0.2.9", "x.example"), true},
		{[]string{"sni", "rdns"}, false, at(0, 1, "192.0.2.9", ""), true},
		{[]string{"sni", "map", "rdns"}, true, at(0, 1, "192.0.2.1", "x.example"), false},
		{[]string{"sni", "map", "rdns"}, true, at(0, 1, "192.0.2.2", ""), true},
		{[]string{"rdns", "map"}, false, at(0, 1, "192.0.2.1", ""), true},
		{[]string{"sni", "map"}, true, at(0, 1, "192.0.2.2", ""), false},
	} {
		cfg := Config{Naming: tc.naming, Map: m, Compare: tc.compare}
		if got := cfg.NeedsRDNS(&tc.flow); got != tc.want {
			t.Errorf("%v compare=%v %s sni %q: %v, want %v", tc.naming, tc.compare, tc.flow.Server, tc.flow.ServerName, got, tc.want)
		}
	}
}

func TestReorder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		flows  []replay.Flow
		want   []req
		late   int64
		perSec []int64 // flows per second
	}{{
		name:   "within the window, sorted",
		window: 10 * time.Second,
		flows:  []replay.Flow{fl(5, 1, "a.example"), fl(2, 2, "a.example"), fl(9, 3, "a.example"), fl(0, 4, "a.example")},
		want:   []req{{0, 4, "a.example"}, {2, 2, "a.example"}, {5, 1, "a.example"}, {9, 3, "a.example"}},
		perSec: []int64{1, 0, 1, 0, 0, 1, 0, 0, 0, 1},
	}, {
		// Window 10 s. 20 releases 0 and 5 (≤ 20−10 = 10); 12 is held.
		// 4 then arrives earlier than the released 5: late, at 5.
		// 30 releases 12 and 20.
		name:   "late flows take the window's edge",
		window: 10 * time.Second,
		flows:  []replay.Flow{fl(0, 1, "a.example"), fl(5, 2, "a.example"), fl(20, 3, "a.example"), fl(12, 4, "a.example"), fl(4, 5, "a.example"), fl(30, 6, "a.example")},
		want:   []req{{0, 1, "a.example"}, {5, 2, "a.example"}, {5, 5, "a.example"}, {12, 4, "a.example"}, {20, 3, "a.example"}, {30, 6, "a.example"}},
		late:   1,
	}, {
		name:   "no window: arrival order, earlier ones late",
		window: -1,
		flows:  []replay.Flow{fl(1, 1, "a.example"), fl(0, 2, "a.example"), fl(2, 3, "a.example")},
		want:   []req{{0, 1, "a.example"}, {0, 2, "a.example"}, {1, 3, "a.example"}},
		late:   1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sch, res := synthesize(t, Config{Naming: []string{"sni"}, Reorder: tc.window}, tc.flows)
			if !reflect.DeepEqual(sch.reqs, tc.want) {
				t.Errorf("requests %v, want %v", sch.reqs, tc.want)
			}
			if res.Late != tc.late || sch.sum.Late != tc.late {
				t.Errorf("late %d, want %d", res.Late, tc.late)
			}
			if tc.perSec != nil {
				var got []int64
				for _, s := range sch.sum.Seconds {
					got = append(got, s.Flows)
				}
				if !reflect.DeepEqual(got, tc.perSec) {
					t.Errorf("flows per second %v, want %v", got, tc.perSec)
				}
			}
		})
	}
}

func TestSeries(t *testing.T) {
	f := func(sec, dur float64, bytes uint64, c int, sni string) replay.Flow {
		x := fl(sec, c, sni)
		x.Duration = time.Duration(dur * float64(time.Second))
		x.BytesOut, x.BytesIn = bytes/4, bytes-bytes/4
		return x
	}
	flows := []replay.Flow{
		// No bytes, unnamed: the schedule's origin.
		f(0, 0, 0, 9, ""),
		// 1000 bytes over [0.5, 2.5): 250, 500, 250.
		f(0.5, 2, 1000, 1, "a.example"),
		// 600 bytes within second 1: all there.
		f(1.2, 0.5, 600, 1, "a.example"),
		// 100 bytes, no duration: in its start second.
		f(3, 0, 100, 2, ""),
		// 4000 bytes over [1, 5): 1000 a second, the end exactly on a
		// second.
		f(1, 4, 4000, 3, "b.example"),
	}
	sch, res := synthesize(t, Config{Naming: []string{"sni"}}, flows)
	want := []replay.Second{
		{Flows: 2, Named: 1, Requests: 1, HTTPSBytes: 250},
		{Flows: 2, Named: 2, ClientHits: 1, Requests: 1, HTTPSBytes: 500 + 600 + 1000},
		{HTTPSBytes: 250 + 1000},
		{Flows: 1, HTTPSBytes: 100 + 1000},
		{HTTPSBytes: 1000},
	}
	got := sch.sum.Seconds
	if len(got) != len(want) {
		t.Fatalf("seconds %+v, want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		if math.Abs(g.HTTPSBytes-want[i].HTTPSBytes) > 1e-6 {
			t.Errorf("second %d: %v bytes, want %v", i, g.HTTPSBytes, want[i].HTTPSBytes)
		}
		g.HTTPSBytes = want[i].HTTPSBytes
		if g != want[i] {
			t.Errorf("second %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if res.HTTPSBytes != 5700 || res.Flows != 5 || res.Requests != 2 || res.ClientCacheHits != 1 {
		t.Errorf("summary %+v", res.ScheduleSummary)
	}
}

type deadHosts map[string]bool

func (d deadHosts) Dead(h string) bool { return d[h] }

func TestDeadTargets(t *testing.T) {
	pk := func(f replay.Flow, out, in uint64) replay.Flow {
		f.PacketsOut, f.PacketsIn = out, in
		return f
	}
	answered := pk(fl(0, 1, "live.example"), 10, 8)
	silent := pk(fl(1, 1, "dead.example"), 3, 0)
	silent2 := pk(fl(2, 2, "dead.example"), 1, 0)
	once := pk(fl(3, 1, "flaky.example"), 2, 0)
	once2 := pk(fl(4, 2, "flaky.example"), 2, 2)
	uncounted := pk(fl(5, 1, "nocount.example"), 0, 0)
	all := []replay.Flow{answered, silent, silent2, once, once2, uncounted}
	for _, tc := range []struct {
		name   string
		counts Counts
		dead   DeadSet
		flows  []replay.Flow
		want   map[string]bool
	}{
		{"auto, counted both ways", CountsAuto, nil, all, map[string]bool{"dead.example": true}},
		{"auto, one-way netflow", CountsAuto, nil, []replay.Flow{silent, silent2, once, uncounted}, map[string]bool{}},
		{"both ways declared", CountsBothWays, nil, []replay.Flow{silent, once}, map[string]bool{"dead.example": true, "flaky.example": true}},
		{"one way declared", CountsOneWay, nil, all, map[string]bool{}},
		{"generator's set", CountsOneWay, deadHosts{"live.example": true}, all, map[string]bool{"live.example": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sch, res := synthesize(t, Config{Naming: []string{"sni"}, Counts: tc.counts, Dead: tc.dead}, tc.flows)
			got := map[string]bool{}
			for _, tg := range sch.targets {
				if tg.Dead {
					got[tg.Host] = true
				}
			}
			if !reflect.DeepEqual(got, tc.want) || res.DeadTargets != int64(len(tc.want)) || sch.sum.DeadTargets != res.DeadTargets {
				t.Errorf("dead %v (%d), want %v", got, res.DeadTargets, tc.want)
			}
		})
	}
	// Targets are sorted and count flows and requests.
	sch, _ := synthesize(t, Config{Naming: []string{"sni"}}, all)
	want := []replay.Target{
		{Type: "target", Host: "dead.example", Port: 443, Flows: 2, Requests: 2, Dead: true},
		{Type: "target", Host: "flaky.example", Port: 443, Flows: 2, Requests: 2},
		{Type: "target", Host: "live.example", Port: 443, Flows: 1, Requests: 1},
		{Type: "target", Host: "nocount.example", Port: 443, Flows: 1, Requests: 1},
	}
	if !reflect.DeepEqual(sch.targets, want) {
		t.Errorf("targets %+v", sch.targets)
	}
}

func TestBounds(t *testing.T) {
	s, _ := New(Config{Naming: []string{"sni"}, TargetsMax: 2})
	var buf bytes.Buffer
	_, err := s.Run(context.Background(), &sliceReader{flows: []replay.Flow{fl(0, 1, "a.example"), fl(1, 1, "b.example"), fl(2, 1, "a.example"), fl(3, 1, "c.example")}}, &buf)
	if !errors.Is(err, ErrTooManyTargets) {
		t.Errorf("targets past the bound: %v", err)
	}
	s, _ = New(Config{Naming: []string{"sni"}, MaxSpan: time.Hour})
	far := fl(3599, 1, "a.example")
	far.Duration = 2 * time.Second
	_, err = s.Run(context.Background(), &sliceReader{flows: []replay.Flow{fl(0, 1, "a.example"), far}}, &buf)
	if !errors.Is(err, ErrSpan) {
		t.Errorf("span past the bound: %v", err)
	}
	for _, cfg := range []Config{{}, {Naming: []string{"map"}}, {Naming: []string{"sni", "sni"}}, {Naming: []string{"dns"}}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	// A cancelled run writes no summary.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, _ = New(Config{Naming: []string{"sni"}})
	buf.Reset()
	if _, err := s.Run(ctx, &sliceReader{flows: []replay.Flow{fl(0, 1, "a.example")}}, &buf); !errors.Is(err, context.Canceled) || strings.Contains(buf.String(), "summary") {
		t.Errorf("cancelled: %v, wrote %q", err, buf.String())
	}
	// An empty trace is a complete, empty schedule.
	sch, res := synthesize(t, Config{Naming: []string{"sni"}}, nil)
	if len(sch.reqs) != 0 || res.Flows != 0 || sch.sum == nil || sch.sum.Seconds == nil {
		t.Errorf("empty: %+v", sch)
	}
}

func TestParseMap(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Map
		err  string
	}{
		{in: "# comment\n192.0.2.1 WWW.Example.com.\n\n2001:db8::1\tv6.example # trailing\n::ffff:192.0.2.2 mapped.example\n",
			want: Map{netip.MustParseAddr("192.0.2.1"): "www.example.com", netip.MustParseAddr("2001:db8::1"): "v6.example", netip.MustParseAddr("192.0.2.2"): "mapped.example"}},
		{in: "192.0.2.1 a.example\n192.0.2.1 a.example\n", want: Map{netip.MustParseAddr("192.0.2.1"): "a.example"}},
		{in: "192.0.2.1\n", err: "line 1: want \"ADDR NAME\", got 1 fields"},
		{in: "\n\n192.0.2.1 a.example b.example\n", err: "line 3:"},
		{in: "example.com 192.0.2.1\n", err: "line 1: \"example.com\" is not an IP address"},
		{in: "192.0.2.1 192.0.2.2\n", err: "line 1: \"192.0.2.2\" is an address"},
		{in: "192.0.2.1 a.example\n192.0.2.1 b.example\n", err: "line 2: 192.0.2.1 is already named a.example"},
		{in: "fe80::1%eth0 a.example\n", err: "line 1:"},
		{in: "192.0.2.1 " + strings.Repeat("a", 64) + ".example\n", err: "line 1: name"},
		{in: "192.0.2.1 a/b.example\n", err: "contains '/'"},
	} {
		m, err := ParseMap(strings.NewReader(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(m, tc.want) {
			t.Errorf("%q: %v %v", tc.in, m, err)
		}
	}
}
