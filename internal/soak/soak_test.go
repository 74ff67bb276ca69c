package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs every attack at small scale for a few seconds and
// checks that the report is complete: the good traffic was sent to both
// services and measured, every attack ran and counted what it did, and the
// text, JSON and plot forms are produced. How well the services held up is
// a timed property, measured by "pkie bench soak" (docs/benchmarks.md), not
// asserted here.
func TestRunSmall(t *testing.T) {
	var progress bytes.Buffer
	r, err := Run(context.Background(), Options{
		Duration: 4 * time.Second,
		Rate:     30,
		Scale: Scale{H2Conns: 2, H2Streams: 10, SlowBodies: 3, FloodWorkers: 5, IdleConns: 5,
			PoisonEvery: 100 * time.Millisecond, MalformedRate: 20},
		Progress:      &progress,
		ProgressEvery: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Phases) != len(Attacks)+3 || r.Phases[0].Name != "baseline" || r.Phases[len(r.Phases)-1].Name != "recovery" {
		t.Errorf("phases = %+v, want baseline, one per attack, all attacks, recovery", r.Phases)
	}
	total := 0
	for _, s := range r.Services {
		if s.Sent == 0 || s.P50ms <= 0 || s.P99ms < s.P50ms {
			t.Errorf("service %s: %+v, want requests sent and measured", s.Service, s.Latency)
		}
		if len(s.Phases) != len(r.Phases) {
			t.Errorf("service %s: %d phase rows for %d phases", s.Service, len(s.Phases), len(r.Phases))
		}
		phaseSent := 0
		for _, p := range s.Phases {
			phaseSent += p.Sent
		}
		if phaseSent != s.Sent {
			t.Errorf("service %s: phases count %d requests of %d", s.Service, phaseSent, s.Sent)
		}
		total += s.Sent
	}
	if len(r.Services) != 2 || total != len(r.Samples) {
		t.Errorf("%d services counting %d requests; %d samples", len(r.Services), total, len(r.Samples))
	}
	for _, k := range r.Kinds {
		if k.Sent == 0 {
			t.Errorf("no %s %s request was sent", k.Service, k.Kind)
		}
	}
	if len(r.Attacks) != len(Attacks) {
		t.Fatalf("%d attacks reported, want %d", len(r.Attacks), len(Attacks))
	}
	for _, a := range r.Attacks {
		var sum int64
		for _, c := range a.Counters {
			sum += c.Value
		}
		if sum == 0 || a.Achieved == "" || a.What == "" || !strings.HasPrefix(a.Source, "127.0.0.") || a.Source == goodSource || len(a.Phases) != 2 {
			t.Errorf("attack %+v: want counts, a summary, its own source address and two phases", a)
		}
	}

	var text bytes.Buffer
	r.WriteText(&text)
	for _, want := range append([]string{"notary", "log", "baseline", "recovery"}, Attacks...) {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Services) != 2 || len(back.Attacks) != len(Attacks) {
		t.Errorf("JSON report does not read back: %v\n%s", err, b)
	}
	svg := filepath.Join(t.TempDir(), "soak.svg")
	if err := r.SavePlot(svg); err != nil {
		t.Fatal(err)
	}
	if img, err := os.ReadFile(svg); err != nil || !bytes.Contains(img, []byte("<svg")) {
		t.Errorf("plot: %v, %d bytes without <svg", err, len(img))
	}
	if !strings.Contains(progress.String(), "notary") {
		t.Errorf("no progress line: %q", progress.String())
	}
}

func TestParseAttacks(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"all", Attacks, false},
		{"", Attacks, false},
		{"none", []string{}, false},
		{"probe-flood, idle-conns,probe-flood", []string{AttackIdleConns, AttackProbeFlood}, false},
		{"probe-flood,nope", nil, true},
	} {
		got, err := ParseAttacks(tc.in)
		if (err != nil) != tc.err || !tc.err && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseAttacks(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		attacks []string
		names   []string
	}{
		{nil, []string{"baseline"}},
		{[]string{AttackPoison}, []string{"baseline", AttackPoison, "recovery"}},
		{[]string{AttackPoison, AttackMalformed}, []string{"baseline", AttackPoison, AttackMalformed, "all attacks", "recovery"}},
	} {
		d := 3 * time.Minute
		ph := schedule(d, tc.attacks)
		var names []string
		end := 0.0
		for _, p := range ph {
			names = append(names, p.Name)
			if p.StartS != end || p.EndS <= p.StartS {
				t.Errorf("%v: phase %+v does not follow the previous one (ended %v)", tc.attacks, p, end)
			}
			end = p.EndS
		}
		if !reflect.DeepEqual(names, tc.names) || end != d.Seconds() {
			t.Errorf("%v: phases %v ending at %v s, want %v ending at %v s", tc.attacks, names, end, tc.names, d.Seconds())
		}
	}
}
