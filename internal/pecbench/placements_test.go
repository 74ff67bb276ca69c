package pecbench

import (
	"context"
	"crypto/tls"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/option"
)

func regionIndex(t *testing.T, code string) int {
	t.Helper()
	for i, r := range PaperRegions {
		if r.Code == code {
			return i
		}
	}
	t.Fatalf("no region %s", code)
	return -1
}

func TestRTTMatrix(t *testing.T) {
	if len(PaperRegions) != 14 {
		t.Fatalf("%d regions, the paper has 14", len(PaperRegions))
	}
	m, err := NewRTTMatrix(PaperRegions, 1.5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b           string
		kmLow, kmHigh  float64
		nearestOfFirst string
	}{
		// Known great-circle distances, to a few percent.
		{"eu-west-2", "eu-central-1", 620, 660, "eu-west-1"},
		{"us-east-1", "eu-central-1", 6450, 6650, "us-east-2"},
		{"ap-northeast-2", "ap-northeast-1", 1130, 1190, "ap-northeast-1"},
		{"sa-east-1", "ap-southeast-2", 13300, 13450, "us-east-1"},
	} {
		i, j := regionIndex(t, tc.a), regionIndex(t, tc.b)
		km := GreatCircleKm(PaperRegions[i], PaperRegions[j])
		if km < tc.kmLow || km > tc.kmHigh {
			t.Errorf("%s–%s: %.0f km, want %.0f–%.0f", tc.a, tc.b, km, tc.kmLow, tc.kmHigh)
		}
		// RTT = 2 × d × 1.5 / 200 km/ms: 15 µs per great-circle km.
		if want := km * 2 * 1.5 / FibreKmPerMs; math.Abs(m.RTTms[i][j]-want) > 1e-9 || m.RTTms[i][j] != m.RTTms[j][i] {
			t.Errorf("%s–%s: RTT %.3f / %.3f ms, want %.3f both ways", tc.a, tc.b, m.RTTms[i][j], m.RTTms[j][i], want)
		}
		if got := PaperRegions[m.Nearest(i)].Code; got != tc.nearestOfFirst {
			t.Errorf("nearest to %s: %s, want %s", tc.a, got, tc.nearestOfFirst)
		}
	}
	if _, err := NewRTTMatrix(PaperRegions, 0.9); err == nil {
		t.Error("a fibre-path factor below 1 was accepted")
	}
}

func TestModelInflation(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		dep        string
		v          uint16
		cs, cc, sc time.Duration
		want       float64
	}{
		// TLS 1.3 is done after one round trip, the proofs a cloud
		// round trip after the certificate: 10/100.
		{DeployClientOnly, tls.VersionTLS13, 100 * ms, 10 * ms, 100 * ms, 0.10},
		// TLS 1.2 has a second round trip to hide the cloud's in.
		{DeployClientOnly, tls.VersionTLS12, 100 * ms, 10 * ms, 100 * ms, 0},
		{DeployClientOnly, tls.VersionTLS12, 50 * ms, 150 * ms, 100 * ms, 1.0},
		// Server forwards at 0.5 RTT: (100 + 150 + 10)/2 = 130, but the
		// client submits itself after a 15 ms grace: 100 + 15 + 10 = 125.
		{DeployClientServer, tls.VersionTLS13, 100 * ms, 10 * ms, 150 * ms, 0.25},
		// The server's path first: (100 + 80 + 10)/2 = 95 against 100.
		{DeployClientServer, tls.VersionTLS13, 100 * ms, 10 * ms, 80 * ms, 0},
		// Near: (20 + 30 + 10)/2 = 30; the client's own 20 + 15 + 10.
		{DeployClientServer, tls.VersionTLS13, 20 * ms, 10 * ms, 30 * ms, 0.5},
		{DeployClientServer, tls.VersionTLS12, 100 * ms, 10 * ms, 150 * ms, 0},
	} {
		if got := ModelInflation(tc.dep, tc.v, tc.cs, tc.cc, tc.sc); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s TLS %s cs %v cc %v sc %v: %v, want %v", tc.dep, versionName(tc.v), tc.cs, tc.cc, tc.sc, got, tc.want)
		}
	}
}

func TestChoosePlacements(t *testing.T) {
	m, _ := NewRTTMatrix(PaperRegions, DefaultFibreFactor)
	cfg := StudyConfig{Random: 150, Nearest: 150, Footprint: 150}
	cfg.defaults()
	ts := choosePlacements(m, &cfg)
	if len(ts) != 450 {
		t.Fatalf("%d placements, want 450", len(ts))
	}
	seen := map[triple]bool{}
	for _, p := range ts {
		if seen[p] {
			t.Fatalf("placement %+v drawn twice", p)
		}
		seen[p] = true
		if p.client == p.server || p.client == p.cloud || p.server == p.cloud {
			t.Fatalf("placement %+v shares a region", p)
		}
		if p.selection == SelectNearest && p.footprint == FootprintRegions && p.cloud != m.Nearest(p.client, p.server) {
			t.Fatalf("nearest placement %+v: cloud is not the nearest to the client", p)
		}
		if (p.footprint == FootprintPoP) != (p.cloud == -1) {
			t.Fatalf("placement %+v: the PoP footprint and only it has no cloud region", p)
		}
	}
	if err := (&StudyConfig{Nearest: 14 * 13 * 12}).Check(); err == nil {
		t.Error("more nearest placements than client–server pairs were accepted")
	}
}

// TestChoosePlacementsCounts checks that each count is taken as given,
// zero leaving its model out, and that Check refuses what cannot run.
func TestChoosePlacementsCounts(t *testing.T) {
	m, _ := NewRTTMatrix(PaperRegions, DefaultFibreFactor)
	for _, tc := range []struct {
		random, nearest, footprint int
	}{{0, 0, 3}, {2, 0, 0}, {0, 5, 0}, {1, 0, 4}, {DefaultPlacements, DefaultPlacements, DefaultPlacements}} {
		cfg := StudyConfig{Random: tc.random, Nearest: tc.nearest, Footprint: tc.footprint}
		if err := cfg.Check(); err != nil {
			t.Errorf("%+v: %v", tc, err)
			continue
		}
		cfg.defaults()
		got := map[string]int{}
		for _, p := range choosePlacements(m, &cfg) {
			got[p.footprint+"/"+p.selection]++
		}
		want := map[string]int{
			FootprintRegions + "/" + SelectRandom:  tc.random,
			FootprintRegions + "/" + SelectNearest: tc.nearest,
			FootprintPoP + "/" + SelectNearest:     tc.footprint,
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%+v: %d %s placements, want %d", tc, got[k], k, n)
			}
		}
	}
	for _, cfg := range []StudyConfig{{}, {Random: -1, Nearest: 2}, {Footprint: -1, Random: 1}} {
		if err := cfg.Check(); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// TestStudy runs three real placements (random, nearest, PoP) and checks
// that each handshake went through the emulated distances: no connection
// can be ready before the round trips it needs.
func TestStudy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cloud and makes real handshakes")
	}
	var progress strings.Builder
	st, err := RunStudy(context.Background(), StudyConfig{Random: 1, Nearest: 1, Footprint: 1, Reps: 1, Scale: 20, LogFill: -1, RevokedFill: -1, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Placements) != 6 {
		t.Fatalf("%d placement records, want 3 placements × 2 TLS versions", len(st.Placements))
	}
	if len(st.Deployments) != 2 || len(st.NotMeasured) != 0 {
		t.Errorf("deployments %v, not measured %v: want client-only and client-server", st.Deployments, st.NotMeasured)
	}
	for _, p := range st.Placements {
		rounds := 1.0
		if p.TLS == "1.2" {
			rounds = 2
		}
		if min := rounds * p.ServerRTTms / st.Scale; p.BaselineMs < min {
			t.Errorf("%+v: TLS %s handshake %.2f ms, faster than its %.0f emulated round trips (%.2f ms)", p, p.TLS, p.BaselineMs, rounds, min)
		}
		if len(p.Runs) == 0 || p.Runs[0].Deployment != DeployClientOnly {
			t.Fatalf("%+v: no client-only run", p)
		}
		// The proofs cannot arrive before the certificate (one round
		// trip to the server) plus a round trip to the cloud.
		if min := (p.ServerRTTms + p.CloudRTTms) / st.Scale; p.Runs[0].MeanMs < min {
			t.Errorf("%+v: client-only PEC ready after %.2f ms, before its proofs could arrive (%.2f ms)", p, p.Runs[0].MeanMs, min)
		}
		if len(p.Runs) != 2 || p.Runs[1].Deployment != DeployClientServer {
			t.Fatalf("%+v: no client-server run", p)
		}
		// The server forwarded on every measured connection, and no
		// proofs can arrive before half a round trip to the server, the
		// server–cloud and the cloud–client legs.
		cs := p.Runs[1]
		if cs.ServerForwards != st.Reps {
			t.Errorf("%+v: the PEC server forwarded %d of %d connections", p, cs.ServerForwards, st.Reps)
		}
		if min := min(p.ServerRTTms+p.ServerCloudRTTms+p.CloudRTTms, 2*p.ServerRTTms+2*p.CloudRTTms) / 2 / st.Scale; cs.MeanMs < min {
			t.Errorf("%+v: client-server PEC ready after %.2f ms, before its proofs could arrive (%.2f ms)", p, cs.MeanMs, min)
		}
		if p.Footprint == FootprintPoP && (p.Cloud != "pop" || p.CloudRTTms != ms(DefaultPoPRTT)) {
			t.Errorf("%+v: the PoP footprint's cloud is not the client's PoP", p)
		}
	}
	if n := len(st.Summaries); n != 12 {
		t.Errorf("%d summaries, want 3 groups × 2 versions × 2 deployments", n)
	}
	if !strings.Contains(progress.String(), "placements: 3/3") {
		t.Errorf("progress does not count placements:\n%s", progress.String())
	}
	var out strings.Builder
	st.WriteText(&out)
	for _, want := range []string{"us-east-1", "aws-14   nearest  1.3  client-only", "pop-all  nearest  1.2  client-server"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	dir := t.TempDir()
	files, err := st.SavePlots(filepath.Join(dir, "study"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 8 {
		t.Fatalf("wrote %v, want figures 5 and 6 for two TLS versions as SVG and PNG", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".svg") && !strings.Contains(string(b), "<svg") || strings.HasSuffix(f, ".png") && !strings.HasPrefix(string(b), "\x89PNG") {
			t.Errorf("%s is not what its name says", f)
		}
	}
}

// TestStudyConfigValidate: Check takes zero as the default, Validate (a
// command's config, every field given) refuses it; both name the field.
func TestStudyConfigValidate(t *testing.T) {
	given := StudyConfig{Random: 1, Nearest: 1, Footprint: 1, Reps: 5, Versions: []uint16{tls.VersionTLS13}, Scale: 10,
		FibreFactor: DefaultFibreFactor, PoPRTT: DefaultPoPRTT, LogFill: 0, RevokedFill: PaperRevokedLeaves}
	for _, tc := range []struct {
		name            string
		edit            func(*StudyConfig)
		check, validate string // the first field named; "": valid
	}{
		{"given", func(*StudyConfig) {}, "", ""},
		{"all zero but counts", func(c *StudyConfig) { *c = StudyConfig{Nearest: 3} }, "", "Reps"},
		{"no placements", func(c *StudyConfig) { c.Random, c.Nearest, c.Footprint = 0, 0, 0 }, "Random", "Random"},
		{"negative count", func(c *StudyConfig) { c.Footprint = -1 }, "Random", "Random"},
		{"too many random", func(c *StudyConfig) { c.Random = 14*13*12 + 1 }, "Random", "Random"},
		{"too many nearest", func(c *StudyConfig) { c.Nearest = 14*13 + 1 }, "Nearest", "Nearest"},
		{"too many footprint", func(c *StudyConfig) { c.Footprint = 14*13 + 1 }, "Nearest", "Nearest"},
		{"zero reps", func(c *StudyConfig) { c.Reps = 0 }, "", "Reps"},
		{"zero scale", func(c *StudyConfig) { c.Scale = 0 }, "", "Scale"},
		{"small scale", func(c *StudyConfig) { c.Scale = 0.5 }, "Scale", "Scale"},
		{"negative scale", func(c *StudyConfig) { c.Scale = -10 }, "Scale", "Scale"},
		{"NaN scale", func(c *StudyConfig) { c.Scale = math.NaN() }, "Scale", "Scale"},
		{"zero fibre", func(c *StudyConfig) { c.FibreFactor = 0 }, "", "FibreFactor"},
		{"short fibre", func(c *StudyConfig) { c.FibreFactor = 0.9 }, "FibreFactor", "FibreFactor"},
		{"zero PoP RTT", func(c *StudyConfig) { c.PoPRTT = 0 }, "", "PoPRTT"},
		{"negative PoP RTT", func(c *StudyConfig) { c.PoPRTT = -time.Millisecond }, "PoPRTT", "PoPRTT"},
		{"no log fill", func(c *StudyConfig) { c.LogFill = -1 }, "", "LogFill"},
		{"log fill too large", func(c *StudyConfig) { c.LogFill = MaxLogFill + 1 }, "LogFill", "LogFill"},
		{"revoked fill at most", func(c *StudyConfig) { c.RevokedFill = MaxRevokedFill }, "", ""},
		{"revoked fill too large", func(c *StudyConfig) { c.RevokedFill = MaxRevokedFill + 1 }, "LogFill", "LogFill"},
		{"TLS 1.1", func(c *StudyConfig) { c.Versions = []uint16{tls.VersionTLS11} }, "Versions", "Versions"},
		{"no versions", func(c *StudyConfig) { c.Versions = nil }, "", "Versions"},
	} {
		c := given
		tc.edit(&c)
		for _, m := range []struct {
			name string
			err  error
			want string
		}{{"Check", c.Check(), tc.check}, {"Validate", c.Validate(), tc.validate}} {
			var oe *option.Error
			switch {
			case m.want == "" && m.err != nil:
				t.Errorf("%s: %s() = %v, want nil", tc.name, m.name, m.err)
			case m.want == "":
			case !errors.As(m.err, &oe):
				t.Errorf("%s: %s() = %v, want an *option.Error", tc.name, m.name, m.err)
			case oe.Fields[0] != m.want || !strings.HasPrefix(m.err.Error(), "pecbench: "):
				t.Errorf("%s: %s() = %q (fields %v), want %s first", tc.name, m.name, m.err, oe.Fields, m.want)
			}
		}
	}
}
