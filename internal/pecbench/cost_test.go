package pecbench

import (
	"math"
	"strings"
	"testing"
)

func TestEgressTiers(t *testing.T) {
	for _, tc := range []struct {
		p    Prices
		gb   float64
		want float64
	}{
		{PaperPrices, 0.5, 0},
		{PaperPrices, 5, 4 * 0.09},
		{TodayPrices, 100, 0},
		{TodayPrices, 1100, 1000 * 0.09},
		// Every tier: 10 TB at 0.09, 40 at 0.085, 100 at 0.07, the rest at 0.05.
		{PaperPrices, 200001, 10000*0.09 + 40000*0.085 + 100000*0.07 + 50000*0.05},
	} {
		if got := tc.p.egressUSD(tc.gb); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s, %v GB: $%.4f, want $%.4f", tc.p.Name, tc.gb, got, tc.want)
		}
	}
}

// TestCostReproducesTable3 checks the model against the figures of the
// paper's Table 3 that it does not take as inputs: the countries' outbound
// traffic, Iceland's traffic cost and the machines for Iceland.
func TestCostReproducesTable3(t *testing.T) {
	if r := PaperConnPerUserSecond; math.Abs(r-0.0012464) > 1e-7 {
		t.Fatalf("connections per user per second %v, want 0.0012464", r)
	}
	rep, err := CostModel(nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]CostLine{}
	for _, l := range rep.Lines {
		if l.Basis == "paper" && l.Prices == PaperPrices.Name {
			lines[l.Region] = l
		}
	}
	for name, want := range PaperTable3 {
		l, ok := lines[name]
		if !ok {
			t.Fatalf("no line for %s", name)
		}
		// Iceland's 0.071 is rounded to three places: 1%.
		if math.Abs(l.InTBPerDay-want.InTBPerDay)/want.InTBPerDay > 0.005 || math.Abs(l.OutTBPerDay-want.OutTBPerDay)/want.OutTBPerDay > 0.01 {
			t.Errorf("%s: %.3f TB in, %.3f TB out a day; Table 3: %.3f, %.3f", name, l.InTBPerDay, l.OutTBPerDay, want.InTBPerDay, want.OutTBPerDay)
		}
		// The table's data costs are 4-8% above AWS's tiers except
		// Iceland's (see the notes); the model must stay within 10%.
		if math.Abs(l.DataUSD-want.DataUSD)/want.DataUSD > 0.10 {
			t.Errorf("%s: data $%.0f, Table 3 $%.0f", name, l.DataUSD, want.DataUSD)
		}
	}
	if l := lines["Iceland"]; math.Abs(l.DataUSD-194)/194 > 0.01 || l.Machines != 1 || l.ComputeUSD != 15 {
		t.Errorf("Iceland: data $%.2f, %d machines, total $%.2f; Table 3: $194, 1, $209", l.DataUSD, l.Machines, l.TotalUSD)
	}
	if g := lines["Global"]; g.Machines != 2329 {
		t.Errorf("global: %d machines, want ceil(3.55e9 × r / 1900) = 2329", g.Machines)
	}
	if len(rep.Bases) != 1 {
		t.Errorf("without a throughput row: %d bases", len(rep.Bases))
	}
}

func TestCostMeasuredBasis(t *testing.T) {
	row := &ThroughputRow{ChainBytes: 4569, Cloud: &Throughput{Name: "cloud", Transport: "quic", PerSecond: 3000, CPUCores: 0.7, PerCPUSecond: 4500, SubmitBytes: 4621, ProofBytes: 1053}}
	rep, err := CostModel(row, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Bases) != 2 || rep.Bases[1].MachinePerSecond != 18000 || rep.Bases[1].InBytes != 4621 || rep.Bases[1].OutBytes != 1053 {
		t.Fatalf("measured basis %+v: want 4 × 4500/s, 4621 B in, 1053 B out", rep.Bases)
	}
	for _, l := range rep.Lines {
		if l.Region == "Global" && l.Basis == "measured" {
			if want := int(math.Ceil(l.ConnPerSec / 18000)); l.Machines != want {
				t.Errorf("global, measured: %d machines, want %d", l.Machines, want)
			}
			if want := l.ConnPerSec * 86400 * 1053 / 1e12; math.Abs(l.OutTBPerDay-want) > 1e-9 {
				t.Errorf("global, measured: %.3f TB out a day, want %.3f", l.OutTBPerDay, want)
			}
		}
	}
	var b strings.Builder
	rep.WriteText(&b)
	for _, want := range []string{"Iceland      Table 3", "basis measured: one machine: 18000 connections/s", "today (2025)", "Global 2024"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	// A slower run with new leaves is the one costed.
	row.CloudNewLeaves = &Throughput{Name: "cloud, new leaves", Transport: "quic", PerCPUSecond: 3000, SubmitBytes: 4700, ProofBytes: 1100}
	if rep, err = CostModel(row, 4); err != nil || rep.Bases[1].MachinePerSecond != 12000 || rep.Bases[1].InBytes != 4700 {
		t.Errorf("with a slower new-leaves run: %+v, %v; want 4 × 3000/s and its sizes", rep.Bases, err)
	}
	if _, err := CostModel(&ThroughputRow{Cloud: &Throughput{PerCPUSecond: 100}}, 2); err == nil {
		t.Error("a throughput row without message sizes was accepted")
	}
}
