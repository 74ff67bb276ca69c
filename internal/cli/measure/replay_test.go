package measure

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

func TestReplayFlows(t *testing.T) {
	td := filepath.Join("..", "..", "replay", "testdata")
	dir := t.TempDir()
	// The conn.log gzipped, as Zeek rotates it.
	raw, err := os.ReadFile(filepath.Join(td, "conn.log"))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	connGz := filepath.Join(dir, "conn.log.gz")
	if err := os.WriteFile(connGz, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(dir, "flows.jsonl")

	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	args := []string{"replay", "flows", "--port", "443,8443", "--zeek-ssl", filepath.Join(td, "ssl.json"), "--out", outFile, "--json", connGz}
	if code := Main(context.Background(), env, args); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum replayFlowsSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	if sum.Format != "zeek" || sum.Read != 6 || sum.Kept != 4 || sum.Named != 2 || sum.Malformed != 1 {
		t.Fatalf("summary %+v", sum)
	}
	written, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(written)), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], `"sni":"example.com"`) || !strings.Contains(lines[3], `"sni":"www.example.org"`) {
		t.Fatalf("flows written:\n%s", written)
	}

	// The written flows read back through auto-detection, to stdout.
	out.Reset()
	errb.Reset()
	if code := Main(context.Background(), env, []string{"replay", "flows", outFile}); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if out.String() != string(written) {
		t.Fatalf("JSON lines did not round-trip:\n%s\nvs\n%s", out.String(), written)
	}
	if want := "jsonl: 4 flows read, 4 kept, 2 named by SNI, 0 malformed"; !strings.Contains(errb.String(), want) {
		t.Fatalf("stderr %q, want %q", errb.String(), want)
	}

	// nfdump, default port, text summary with the first malformed line.
	out.Reset()
	errb.Reset()
	if code := Main(context.Background(), env, []string{"replay", "flows", filepath.Join(td, "nfdump-1.6.csv")}); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Fatalf("%d nfdump flows, want 2:\n%s", n, out.String())
	}
	if !strings.Contains(errb.String(), "nfdump: 6 flows read, 2 kept, 0 named by SNI, 1 malformed") ||
		!strings.Contains(errb.String(), "first malformed record: line 8: sa:") {
		t.Fatalf("stderr %q", errb.String())
	}
}

func TestReplayFlowsErrors(t *testing.T) {
	td := filepath.Join("..", "..", "replay", "testdata")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"replay", "flows"}, "want one TRACE"},
		{[]string{"replay", "flows", "--format", "netflow", "x"}, `--format "netflow"`},
		{[]string{"replay", "flows", "--port", "443,http", "x"}, `--port "443,http"`},
		{[]string{"replay", "flows", "--zeek-ssl", filepath.Join(td, "ssl.log"), filepath.Join(td, "nfdump-1.6.csv")}, "--zeek-ssl goes with a Zeek conn.log"},
		{[]string{"replay", "flows", filepath.Join(td, "nope")}, "no such file"},
		{[]string{"replay", "flows", "--format", "pcap", filepath.Join(td, "conn.log")}, "pcap"},
		{[]string{"replay", "frobnicate"}, `unknown subcommand "frobnicate"`},
	} {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := Main(context.Background(), env, tc.args); code != ExitUsage || !strings.Contains(errb.String(), tc.msg) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one line with %q", tc.args, code, errb.String(), tc.msg)
		}
	}
}

func TestReplayFlowsStdinAndInterrupt(t *testing.T) {
	td := filepath.Join("..", "..", "replay", "testdata")
	raw, err := os.ReadFile(filepath.Join(td, "nfdump-1.7-csv-fast.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env := &Env{Stdin: bytes.NewReader(raw), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	if code := Main(context.Background(), env, []string{"replay", "flows", "-", "--json"}); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// Flows alone on stdout, the JSON summary on stderr.
	if n := strings.Count(out.String(), "\n"); n != 2 || !strings.Contains(out.String(), `"server":"198.51.100.7"`) {
		t.Fatalf("stdout:\n%s", out.String())
	}
	var sum replayFlowsSummary
	if err := json.Unmarshal(errb.Bytes(), &sum); err != nil || sum.Format != "nfdump" || sum.Read != 4 || sum.Kept != 2 {
		t.Fatalf("summary %q (%v)", errb.String(), err)
	}

	// A cancelled context (Ctrl-C) stops the read, says so, and still
	// reports what was done.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out.Reset()
	errb.Reset()
	env.Stdin = &cancelAfterRead{r: bytes.NewReader(raw), cancel: cancel}
	if code := Main(ctx, env, []string{"replay", "flows", "-"}); code != ExitUsage {
		t.Fatalf("exit %d, want %d", code, ExitUsage)
	}
	if !strings.Contains(errb.String(), "0 flows read, 0 kept") || !strings.Contains(errb.String(), "interrupted: 0 flows written") || out.Len() != 0 {
		t.Fatalf("stderr %q stdout %q", errb.String(), out.String())
	}
}

// cancelAfterRead cancels its context once its first bytes are read: a
// Ctrl-C arriving once the trace is open.
type cancelAfterRead struct {
	r      *bytes.Reader
	cancel context.CancelFunc
}

func (c *cancelAfterRead) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.cancel()
	return n, err
}

// TestReplayFlowsPCAP runs pkie replay flows on tcpdump's and dumpcap's
// captures of real TLS connections on loopback (internal/replay/testdata/
// make-pcap-fixtures.sh): curl asking OpenSSL's s_server for a.example,
// b.example and c.example, then by address (no SNI), then v6.example over
// ::1, then a connection refused on port 9.
func TestReplayFlowsPCAP(t *testing.T) {
	td := filepath.Join("..", "..", "replay", "testdata")
	// The pcap gzipped too, as a capture piped through gzip is stored.
	raw, err := os.ReadFile(filepath.Join(td, "tls-lo.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	pcapGz := filepath.Join(t.TempDir(), "tls-lo.pcap.gz")
	if err := os.WriteFile(pcapGz, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		client, sni          string
		bytesOut, packetsOut int
	}{
		{"127.0.0.1", "a.example", 1192, 9},
		{"127.0.0.1", "b.example", 1192, 9},
		{"127.0.0.1", "c.example", 1192, 9},
		{"127.0.0.1", "", 1192, 9},
		{"::1", "v6.example", 1373, 9},
	}
	for _, trace := range []string{filepath.Join(td, "tls-lo.pcap"), filepath.Join(td, "tls-lo.pcapng"), filepath.Join(td, "tls-sll.pcap"), filepath.Join(td, "tls-sll2.pcap"), pcapGz} {
		t.Run(filepath.Base(trace), func(t *testing.T) {
			code, out, errs := runCLI(t, "replay", "flows", trace)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != len(want) {
				t.Fatalf("%d flows, want %d:\n%s", len(lines), len(want), out)
			}
			for i, line := range lines {
				var f struct {
					Client     string `json:"client"`
					Server     string `json:"server"`
					Port       int    `json:"port"`
					SNI        string `json:"sni"`
					Start      string `json:"start"`
					Duration   int64  `json:"duration_ns"`
					BytesOut   int    `json:"bytes_out"`
					PacketsOut int    `json:"packets_out"`
					BytesIn    int    `json:"bytes_in"`
				}
				if err := json.Unmarshal([]byte(line), &f); err != nil {
					t.Fatalf("line %d %q: %v", i, line, err)
				}
				w := want[i]
				if f.Client != w.client || f.Server != w.client || f.Port != 443 || f.SNI != w.sni ||
					f.BytesOut != w.bytesOut || f.PacketsOut != w.packetsOut || f.BytesIn < 6900 || f.Duration <= 0 ||
					!strings.HasPrefix(f.Start, "2026-11-23T") {
					t.Errorf("flow %d: %s", i, line)
				}
			}
			if sum := "pcap: 5 flows read, 5 kept, 4 named by SNI, 0 malformed"; !strings.Contains(errs, sum) {
				t.Errorf("stderr %q, want %q", errs, sum)
			}

			// Port 9 too, with the JSON summary.
			code, out, errs = runCLI(t, "replay", "flows", "--port", "443,9", "--json", trace)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var sum replayFlowsSummary
			if err := json.Unmarshal([]byte(errs), &sum); err != nil {
				t.Fatalf("summary %q: %v", errs, err)
			}
			if sum.Format != "pcap" || sum.Kept != 6 || sum.Named != 4 || sum.Packets != 92 || sum.Malformed != 0 ||
				strings.Count(out, "\n") != 6 || !strings.Contains(out, `"port":9,"bytes_out":60,"bytes_in":40,"packets_out":1,"packets_in":1}`) {
				t.Errorf("summary %+v, flows:\n%s", sum, out)
			}
		})
	}
}

// TestReplayFlowsLinkTypeWarning checks that a capture of a link type pkie
// does not read (here Wi-Fi monitor frames) says so instead of reporting
// 0 flows in silence.
func TestReplayFlowsLinkTypeWarning(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lt layers.LinkType, n int) string {
		var b bytes.Buffer
		w := pcapgo.NewWriter(&b)
		if err := w.WriteFileHeader(65535, lt); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			frame := make([]byte, 60)
			if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1700000000+int64(i), 0), CaptureLength: 60, Length: 60}, frame); err != nil {
				t.Fatal(err)
			}
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wifi := write("wifi.pcap", layers.LinkTypeIEEE802_11, 4)
	code, out, errs := runCLI(t, "replay", "flows", wifi)
	if code != ExitOK || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	if want := "warning: " + wifi + ": no flows: 4 of its 4 packets have link type 105 (802.11), which pkie does not read"; !strings.Contains(errs, want) {
		t.Errorf("stderr %q, want %q", errs, want)
	}
	// With --json on stderr, the summary says it.
	code, _, errs = runCLI(t, "replay", "flows", "--json", wifi)
	var sum replayFlowsSummary
	if err := json.Unmarshal([]byte(errs), &sum); code != ExitOK || err != nil {
		t.Fatalf("exit %d, summary %q: %v", code, errs, err)
	}
	if sum.OtherLink != 4 || sum.OtherLinkType != "105 (802.11)" || sum.Packets != 4 || sum.Kept != 0 {
		t.Errorf("summary %+v", sum)
	}
	// An Ethernet capture of the same zero frames is not TCP: no warning,
	// but the count.
	eth := write("eth.pcap", layers.LinkTypeEthernet, 2)
	if code, _, errs := runCLI(t, "replay", "flows", eth); code != ExitOK || strings.Contains(errs, "warning") ||
		!strings.Contains(errs, "2 packets: 2 not TCP over IP, 0 captured short") {
		t.Errorf("exit %d, stderr %s", code, errs)
	}
}
