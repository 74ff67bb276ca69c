package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/dnstest"
	"github.com/pkie/pkie/internal/replay"
)

// readSchedule reads a schedule file back with replay's reader.
func readSchedule(t *testing.T, path string) (replay.ScheduleHeader, []replay.Request, []replay.Target, *replay.ScheduleSummary) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sr, err := replay.NewScheduleReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []replay.Request
	for {
		r, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r.Type = ""
		reqs = append(reqs, r)
	}
	tg, sum, err := sr.Rest()
	if err != nil {
		t.Fatal(err)
	}
	return sr.Header, reqs, tg, sum
}

func runPkie(t *testing.T, ctx context.Context, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: stdin, Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code := Main(ctx, env, args)
	return code, out.String(), errb.String()
}

func TestReplaySynthZeek(t *testing.T) {
	td := filepath.Join("..", "..", "replay", "testdata")
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "map.txt")
	// 198.51.100.7 is the conn.log's S0 flow: packets out, none back.
	os.WriteFile(mapFile, []byte("# the silent server\n198.51.100.7 silent.example\n93.184.216.34 example.com\n"), 0o644)
	outFile := filepath.Join(dir, "schedule.jsonl")
	code, stdout, stderr := runPkie(t, context.Background(), nil, "replay", "synth", "--port", "443,8443",
		"--zeek-ssl", filepath.Join(td, "ssl.log"), "--map", mapFile, "--out", outFile, "--json", filepath.Join(td, "conn.log"))
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sum replaySynthSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout, err)
	}
	// Four kept flows: two named by ssl.log (one at a mapped address),
	// one by the map, one lost; the SNI of www.example.org recovers a
	// flow whose address the map does not name.
	if sum.Format != "zeek" || sum.Flows != 4 || sum.NamedSNI != 2 || sum.NamedMap != 1 || sum.Unnamed != 1 ||
		sum.SNIRecovered != 1 || sum.Requests != 3 || sum.Targets != 3 || sum.DeadTargets != 1 || sum.Seconds != 10 {
		t.Errorf("summary %s", stdout)
	}
	if strings.Contains(stdout, `"seconds": [`) || strings.Contains(stdout, `"type"`) {
		t.Errorf("the JSON summary holds the series or a record type: %s", stdout)
	}
	h, reqs, tgs, s := readSchedule(t, outFile)
	start := time.Date(2014, 3, 1, 10, 0, 0, 123456000, time.UTC)
	if !h.Start.Equal(start) || !reflect.DeepEqual(h.Naming, []string{"sni", "map"}) || h.Source != filepath.Join(td, "conn.log")+" (zeek)" {
		t.Errorf("header %+v", h)
	}
	want := []replay.Request{
		{T: 0, Client: netip.MustParseAddr("10.0.0.1"), Host: "example.com", Port: 443},
		{T: 876544 * time.Microsecond, Client: netip.MustParseAddr("10.0.0.2"), Host: "silent.example", Port: 443},
		{T: 5376544 * time.Microsecond, Client: netip.MustParseAddr("2001:db8::1"), Host: "www.example.org", Port: 8443},
	}
	if !reflect.DeepEqual(reqs, want) {
		t.Errorf("requests %+v", reqs)
	}
	if len(tgs) != 3 || tgs[1].Host != "silent.example" || !tgs[1].Dead || tgs[0].Dead || tgs[2].Dead {
		t.Errorf("targets %+v", tgs)
	}
	if s.Flows != 4 || len(s.Seconds) != 10 || s.HTTPSBytes != 17744 {
		t.Errorf("written summary %+v", s)
	}

	// The human summary says what the issue asks for.
	code, _, stderr = runPkie(t, context.Background(), nil, "replay", "synth", "--port", "443,8443",
		"--zeek-ssl", filepath.Join(td, "ssl.log"), "--map", mapFile, "--out", outFile, filepath.Join(td, "conn.log"))
	for _, w := range []string{"named by SNI / map / reverse DNS / lost: 2 / 1 / 0 / 1", "SNI recovered: 1 flows", "client cache hits: 0", "requests: 3", "targets (dead): 3 (1)"} {
		if code != ExitOK || !strings.Contains(stderr, w) {
			t.Errorf("exit %d, summary lacks %q:\n%s", code, w, stderr)
		}
	}
}

func TestReplaySynthNfdump(t *testing.T) {
	td := filepath.Join("..", "..", "replay", "testdata")
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "map.txt")
	os.WriteFile(mapFile, []byte("93.184.216.34 example.com\n198.51.100.7 silent.example\n"), 0o644)
	outFile := filepath.Join(dir, "s.jsonl")
	code, _, stderr := runPkie(t, context.Background(), nil, "replay", "synth", "--map", mapFile, "--out", outFile,
		filepath.Join(td, "nfdump-1.7-csv-fast.csv"))
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, reqs, tgs, s := readSchedule(t, outFile)
	// One-way netflow: the SYN-only flow to 198.51.100.7 has no packets
	// back because nfdump's record counts one way, so nothing is dead.
	if len(reqs) != 2 || reqs[1].Host != "silent.example" || reqs[1].T != 4*time.Second || s.DeadTargets != 0 || len(tgs) != 2 || tgs[1].Dead {
		t.Errorf("requests %+v targets %+v summary %+v", reqs, tgs, s)
	}
	// 1141 bytes over 2.5 s from second 0, 60 at second 4.
	if len(s.Seconds) != 5 || s.Seconds[0].HTTPSBytes != 1141*0.4 || s.Seconds[2].HTTPSBytes != 1141*0.2 || s.Seconds[4].HTTPSBytes != 60 {
		t.Errorf("seconds %+v", s.Seconds)
	}
}

// synthTrace writes flows as pkie JSON lines.
func synthTrace(t *testing.T, path string, flows []replay.Flow) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := replay.NewJSONLWriter(f)
	for _, fl := range flows {
		w.Write(fl)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestReplaySynthRDNS(t *testing.T) {
	ip := netip.MustParseAddr
	srv := dnstest.Start(t, map[netip.Addr][]string{
		ip("192.0.2.1"): {"www.example.com."},
		ip("192.0.2.2"): {"CDN-node.example.net."},
	}, nil)
	start := time.Date(2013, 4, 21, 12, 0, 0, 0, time.UTC)
	flow := func(sec int, client, server, sni string) replay.Flow {
		return replay.Flow{Start: start.Add(time.Duration(sec) * time.Second), Client: ip(client), Server: ip(server), Port: 443, ServerName: sni}
	}
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	synthTrace(t, trace, []replay.Flow{
		flow(0, "10.0.0.1", "192.0.2.1", ""),
		flow(1, "10.0.0.1", "192.0.2.1", ""),                // client cache hit
		flow(2, "10.0.0.2", "192.0.2.2", ""),                // named by PTR
		flow(3, "10.0.0.2", "192.0.2.3", "cdn.example.org"), // no PTR: SNI recovers it
		flow(4, "10.0.0.3", "192.0.2.3", ""),                // lost
		flow(5, "10.0.0.3", "192.0.2.4", "www.example.com"), // no PTR: recovered
		flow(6, "10.0.0.3", "192.0.2.1", "www.example.com"), // SNI, PTR agrees; the client has it cached
	})
	cache := filepath.Join(dir, "rdns.cache")
	out1, out2 := filepath.Join(dir, "s1.jsonl"), filepath.Join(dir, "s2.jsonl")
	args := func(out string) []string {
		return []string{"replay", "synth", "--rdns", "--resolver", srv.Addr, "--rdns-cache", cache,
			"--rdns-rate", "1000", "--json", "--out", out, trace}
	}
	code, stdout, stderr := runPkie(t, context.Background(), nil, args(out1)...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sum replaySynthSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	// Four distinct addresses, each asked once (compare is on, so the
	// SNI-named flows' addresses are asked too).
	if got := srv.Queries(); got != 4 {
		t.Errorf("%d queries, want 4", got)
	}
	if sum.RDNS == nil || sum.RDNS.Queries != 4 || sum.RDNS.Named != 2 || sum.RDNS.NoName != 2 ||
		sum.NamedSNI != 3 || sum.NamedRDNS != 3 || sum.Unnamed != 1 || sum.SNIRecovered != 2 || sum.ClientCacheHits != 2 || sum.Requests != 4 {
		t.Errorf("summary %s", stdout)
	}
	_, reqs, _, _ := readSchedule(t, out1)
	var hosts []string
	for _, r := range reqs {
		hosts = append(hosts, fmt.Sprintf("%v %s %s", r.T.Seconds(), r.Client, r.Host))
	}
	want := []string{"0 10.0.0.1 www.example.com", "2 10.0.0.2 cdn-node.example.net", "3 10.0.0.2 cdn.example.org", "5 10.0.0.3 www.example.com"}
	if !reflect.DeepEqual(hosts, want) {
		t.Errorf("requests %q", hosts)
	}
	cached, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cached), "192.0.2.1 www.example.com ") || !strings.Contains(string(cached), "192.0.2.3 - ") {
		t.Errorf("cache file:\n%s", cached)
	}

	// A second run answers everything from the cache: no query.
	code, _, stderr = runPkie(t, context.Background(), nil, args(out2)...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := srv.Queries(); got != 4 {
		t.Errorf("second run made %d queries", got-4)
	}
	b1, _ := os.ReadFile(out1)
	b2, _ := os.ReadFile(out2)
	if !bytes.Equal(b1, b2) {
		t.Errorf("the cached run's schedule differs:\n%s\n%s", b1, b2)
	}
}

func TestReplaySynthErrors(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	synthTrace(t, trace, []replay.Flow{{Start: time.Unix(0, 0), Client: netip.MustParseAddr("10.0.0.1"), Server: netip.MustParseAddr("192.0.2.1"), Port: 443, ServerName: "a.example"}})
	badMap := filepath.Join(dir, "bad.map")
	os.WriteFile(badMap, []byte("192.0.2.1 a.example\n\n192.0.2.2\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rdns", "-"}, "not stdin"},
		{[]string{"--name", "sni,map", trace}, "needs --map FILE"},
		{[]string{"--name", "sni,dns", trace}, "want sni, map and rdns"},
		{[]string{"--map", badMap, "--name", "sni", trace}, "leaves out map"},
		{[]string{"--map", badMap, trace}, "bad.map: line 3: want \"ADDR NAME\""},
		{[]string{"--resolver", "127.0.0.1:53", trace}, "--resolver goes with --rdns"},
		{[]string{"--targets-max", "0", trace}, "must be positive"},
	} {
		code, _, stderr := runPkie(t, context.Background(), nil, append([]string{"replay", "synth"}, tc.args...)...)
		if code == ExitOK || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
}

// cancellingReader hands out its data in two halves and cancels between
// them, as Ctrl-C in the middle of a trace.
type cancellingReader struct {
	parts  [][]byte
	cancel func()
}

func (r *cancellingReader) Read(b []byte) (int, error) {
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	if len(r.parts) == 1 {
		r.cancel()
	}
	n := copy(b, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	if len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	return n, nil
}

func TestReplaySynthInterrupted(t *testing.T) {
	var buf bytes.Buffer
	w := replay.NewJSONLWriter(&buf)
	for i := range 2000 {
		w.Write(replay.Flow{Start: time.Unix(int64(i), 0), Client: netip.MustParseAddr("10.0.0.1"), Server: netip.MustParseAddr("192.0.2.1"), Port: 443, ServerName: fmt.Sprintf("h%d.example", i)})
	}
	w.Flush()
	half := buf.Len() / 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := &cancellingReader{parts: [][]byte{buf.Bytes()[:half], buf.Bytes()[half:]}, cancel: cancel}
	dir := t.TempDir()
	out := filepath.Join(dir, "s.jsonl")
	code, _, stderr := runPkie(t, ctx, in, "replay", "synth", "--reorder", "1s", "--out", out, "-")
	if code == ExitOK || !strings.Contains(stderr, "interrupted") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cut-short schedule was left at --out: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left behind: %v", left)
	}

	// An earlier complete schedule at --out is left as it was.
	os.WriteFile(out, []byte("earlier\n"), 0o644)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	in = &cancellingReader{parts: [][]byte{buf.Bytes()[:half], buf.Bytes()[half:]}, cancel: cancel}
	if code, _, stderr := runPkie(t, ctx, in, "replay", "synth", "--out", out, "-"); code == ExitOK {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "earlier\n" {
		t.Errorf("--out after an interrupted run: %q", b)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("files left behind: %v", left)
	}
}

func TestReplaySynthGenerate(t *testing.T) {
	dir := t.TempDir()
	run := func(out string, extra ...string) replaySynthSummary {
		t.Helper()
		args := append([]string{"replay", "synth", "--generate", "--flows", "5000", "--duration", "2m", "--clients", "300", "--seed", "7", "--json", "--out", out}, extra...)
		code, stdout, stderr := runPkie(t, context.Background(), nil, args...)
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var sum replaySynthSummary
		if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	sum := run(a)
	// Every flow has SNI; the generator's PTR records name the
	// resolvable ones' addresses, so the rest are recovered by SNI.
	if sum.Flows != 5000 || sum.NamedSNI != 5000 || sum.Unnamed != 0 || sum.SNIRecovered <= 0 || sum.SNIRecovered >= 5000 ||
		sum.Requests+sum.ClientCacheHits != 5000 || sum.DeadTargets == 0 || !strings.HasPrefix(sum.Source, "generator seed=7 flows=5000") {
		t.Errorf("summary %+v", sum)
	}
	// The same flags make the same schedule.
	run(b)
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ba, bb) {
		t.Error("two runs with the same seed differ")
	}
	_, reqs, tgs, s := readSchedule(t, a)
	var dead, deadReqs int64
	for _, tg := range tgs {
		if tg.Dead {
			dead++
			deadReqs += tg.Requests
		}
	}
	if int64(len(reqs)) != sum.Requests || dead != sum.DeadTargets || s.DeadTargets != dead || deadReqs == 0 {
		t.Errorf("%d requests, %d dead targets with %d requests; summary %+v", len(reqs), dead, deadReqs, sum)
	}

	// Without SNI, as the paper's netflow: only the PTR-named share.
	sum = run(filepath.Join(dir, "c.jsonl"), "--no-sni")
	if sum.NamedSNI != 0 || sum.NamedRDNS == 0 || sum.Unnamed == 0 || sum.NamedRDNS+sum.Unnamed != 5000 || sum.SNIRecovered != 0 {
		t.Errorf("no-sni summary %+v", sum)
	}
	// SNI alone, the generator's PTR records left out: nothing to
	// compare.
	sum = run(filepath.Join(dir, "d.jsonl"), "--name", "sni")
	if sum.NamedSNI != 5000 || sum.SNIRecovered != -1 || !reflect.DeepEqual(sum.Naming, []string{"sni"}) {
		t.Errorf("sni-only summary %+v", sum)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--generate", "--rdns"}, "--rdns goes with a TRACE"},
		{[]string{"--generate", "--port", "8443"}, "--port goes with a TRACE"},
		{[]string{"--generate", "trace.jsonl"}, "no TRACE"},
		{[]string{"--seed", "3", "trace.jsonl"}, "--seed goes with --generate"},
	} {
		code, _, stderr := runPkie(t, context.Background(), nil, append([]string{"replay", "synth"}, tc.args...)...)
		if code == ExitOK || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
}
