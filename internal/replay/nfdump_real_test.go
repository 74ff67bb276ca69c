package replay

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
)

// flowCounts is what nfdump can say of a flow, less its times.
type flowCounts struct {
	client, server   string
	port             uint16
	pktOut, bytesOut uint64
	pktIn, bytesIn   uint64
}

func countsOf(flows []Flow) []flowCounts {
	var out []flowCounts
	for _, f := range flows {
		out = append(out, flowCounts{f.Client.String(), f.Server.String(), f.Port, f.PacketsOut, f.BytesOut, f.PacketsIn, f.BytesIn})
	}
	slices.SortFunc(out, func(a, b flowCounts) int {
		return cmp.Or(cmp.Compare(a.client, b.client), cmp.Compare(a.port, b.port), cmp.Compare(a.bytesOut, b.bytesOut),
			cmp.Compare(a.pktOut, b.pktOut), cmp.Compare(a.bytesIn, b.bytesIn))
	})
	return out
}

// TestNfdumpReal reads what nfpcapd and nfdump 1.7.1 made of tls-lo.pcap
// (testdata/make-nfdump-fixtures.sh): every layout nfdump 1.7.1 writes as
// CSV, checked against the capture's known connections.
func TestNfdumpReal(t *testing.T) {
	lo := func(v6 bool) string {
		if v6 {
			return "::1"
		}
		return "127.0.0.1"
	}
	for _, tc := range []struct {
		file  string
		read  int64
		bidir bool // the answer's counts are in the client's record
		order bool // in order of start
	}{
		{"nfdump-1.7.1.csv", 12, false, false},
		{"nfdump-1.7.1-q.csv", 12, false, false},
		{"nfdump-1.7.1-B.csv", 6, true, false},
		{"nfdump-1.7.1-tstart.csv", 12, false, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := openFixture(t, tc.file, FormatAuto, Options{})
			flows := drainFlows(t, r)
			st := r.Stats()
			if st.Read != tc.read || st.Kept != 5 || st.Malformed != 0 || st.Named != 0 {
				t.Fatalf("stats %+v, want %d read, 5 kept, none malformed", st, tc.read)
			}
			var want []flowCounts
			for _, c := range realCapture {
				w := flowCounts{lo(c.v6), lo(c.v6), 443, c.pktOut, c.bytesOut, 0, 0}
				if tc.bidir {
					w.pktIn, w.bytesIn = c.pktIn, c.bytesIn
				}
				want = append(want, w)
			}
			if got := countsOf(flows); !slices.Equal(got, sortedCounts(want)) {
				t.Errorf("flows\n got %+v\nwant %+v", got, sortedCounts(want))
			}
			for i, f := range flows {
				// nfdump 1.7.1's CSV has whole seconds; td milliseconds.
				if f.Start.Nanosecond() != 0 || f.Start.Before(time.Date(2026, 11, 23, 12, 5, 11, 0, time.UTC)) ||
					f.Duration <= 0 || f.Duration%time.Millisecond != 0 || f.Duration > 10*time.Millisecond {
					t.Errorf("flow %d: start %v, duration %v", i, f.Start, f.Duration)
				}
			}
			if tc.order {
				for i, c := range realCapture {
					if flows[i].BytesOut != c.bytesOut {
						t.Errorf("flow %d of the sorted output has %d bytes out, want %d (%s)", i, flows[i].BytesOut, c.bytesOut, c.sni)
					}
				}
			}
			// With port 9 too, the refused connection's SYN.
			flows = drainFlows(t, openFixture(t, tc.file, FormatNfdump, Options{Ports: []uint16{443, 9}}))
			n := 0
			for _, f := range flows {
				if f.Port == 9 {
					n++
					if f.PacketsOut != 1 || f.BytesOut != 60 {
						t.Errorf("port 9 flow %+v, want the 60-byte SYN", f)
					}
				}
			}
			if len(flows) != 6 || n != 1 {
				t.Errorf("ports 443 and 9: %d flows, %d to port 9; want 6, 1", len(flows), n)
			}
		})
	}
}

func sortedCounts(c []flowCounts) []flowCounts {
	c = slices.Clone(c)
	slices.SortFunc(c, func(a, b flowCounts) int {
		return cmp.Or(cmp.Compare(a.client, b.client), cmp.Compare(a.port, b.port), cmp.Compare(a.bytesOut, b.bytesOut),
			cmp.Compare(a.pktOut, b.pktOut), cmp.Compare(a.bytesIn, b.bytesIn))
	})
	return c
}

// nfdumpOf runs the real nfpcapd and nfdump -B on a capture, as an
// operator would, and returns the CSV.
func nfdumpOf(t *testing.T, pcap []byte, args ...string) []byte {
	t.Helper()
	for _, tool := range []string{"nfpcapd", "nfdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian: apt-get install nfdump): the real-tool test is skipped", tool)
		}
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "trace.pcap")
	if err := os.WriteFile(in, pcap, 0o644); err != nil {
		t.Fatal(err)
	}
	flows := filepath.Join(dir, "flows")
	if err := os.Mkdir(flows, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "nfpcapd", "-r", in, "-w", flows).CombinedOutput(); err != nil {
		t.Fatalf("nfpcapd: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, "nfdump", append([]string{"-R", flows}, args...)...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nfdump %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

// TestNfdumpTools runs the real nfpcapd and nfdump, when installed, on
// traces this test writes (Ethernet and Linux cooked frames) and checks
// that the nfdump reader gives the flows the pcap reader gives of the same
// packets: same endpoints, packets and bytes each way, start to nfdump's
// whole second, duration to its millisecond.
func TestNfdumpTools(t *testing.T) {
	for _, lt := range []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL} {
		t.Run(lt.String(), func(t *testing.T) {
			trace := loopbackTrace(t, false, lt)
			names := trace.names
			direct := drainFlows(t, mustOpen(t, trace.pcap, FormatPCAP))
			if len(direct) != len(names) {
				t.Fatalf("pcap reader: %d flows, want %d", len(direct), len(names))
			}
			for _, args := range [][]string{{"-B", "-o", "csv"}, {"-B", "-q", "-o", "csv"}} {
				csv := nfdumpOf(t, trace.pcap, args...)
				r := mustOpen(t, csv, FormatAuto)
				flows := drainFlows(t, r)
				if got, want := countsOf(flows), countsOf(direct); !slices.Equal(got, want) {
					t.Fatalf("nfdump %v:\n got %+v\nwant %+v\n%s", args, got, want, csv)
				}
				for _, f := range flows {
					ok := false
					for _, d := range direct {
						if d.Client == f.Client && d.BytesOut == f.BytesOut && d.BytesIn == f.BytesIn &&
							d.Start.Truncate(time.Second).Equal(f.Start) && (d.Duration-f.Duration).Abs() < time.Millisecond {
							ok = true
						}
					}
					if !ok {
						t.Errorf("nfdump %v: flow %+v has no match in the pcap reader's %+v", args, f, direct)
					}
				}
			}
		})
	}
}

func mustOpen(t *testing.T, b []byte, format string) Reader {
	t.Helper()
	r, err := Open(bytes.NewReader(b), format, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
