package measure

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/replay/gen"
)

func runGen(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = Main(ctx, env, append([]string{"replay", "gen"}, args...))
	return out.String(), errb.String(), code
}

func readTrace(t *testing.T, path, ssl string) []replay.Flow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var opt replay.Options
	if ssl != "" {
		s, err := os.Open(ssl)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		opt.ZeekSSL = s
	}
	r, err := replay.Open(f, replay.FormatAuto, opt)
	if err != nil {
		t.Fatal(err)
	}
	var fs []replay.Flow
	for {
		fl, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, fl)
	}
	if st := r.Stats(); st.Malformed != 0 {
		t.Fatalf("%s: %+v", path, st)
	}
	return fs
}

func TestReplayGen(t *testing.T) {
	dir := t.TempDir()
	small := []string{"--flows", "3000", "--clients", "40", "--duration", "2m", "--seed", "7"}
	trace, mapFile := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "t.map")
	stdout, stderr, code := runGen(t, context.Background(), append(small, "--out", trace, "--map", mapFile, "--json")...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sum replayGenSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout, err)
	}
	flows := readTrace(t, trace, "")
	if len(flows) != 3000 || sum.Flows != 3000 || sum.SNI != 3000 || sum.Resolvable == 0 || sum.Unanswered == 0 {
		t.Fatalf("%d flows read; summary %+v", len(flows), sum)
	}
	// The map names every resolvable address of the trace, by its SNI,
	// and no other.
	ptr := map[netip.Addr]string{}
	mf, err := os.Open(mapFile)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(mf)
	for sc.Scan() {
		a, name, ok := strings.Cut(sc.Text(), " ")
		addr, err := netip.ParseAddr(a)
		if !ok || err != nil || name == "" {
			t.Fatalf("map line %q", sc.Text())
		}
		ptr[addr] = name
	}
	mf.Close()
	if len(ptr) != sum.MapEntries {
		t.Errorf("%d map lines, summary says %d", len(ptr), sum.MapEntries)
	}
	var resolvable int64
	used := map[netip.Addr]bool{}
	for _, f := range flows {
		if name, ok := ptr[f.Server]; ok {
			resolvable++
			used[f.Server] = true
			if name != f.ServerName {
				t.Fatalf("map names %v %s, its flow's SNI is %s", f.Server, name, f.ServerName)
			}
		}
	}
	if resolvable != sum.Resolvable || len(used) != len(ptr) {
		t.Errorf("map names %d flows (summary %d), %d of its %d addresses in the trace", resolvable, sum.Resolvable, len(used), len(ptr))
	}

	// The same flags make the same bytes, in every format; the Zeek
	// logs name the answered flows.
	again := filepath.Join(dir, "again.jsonl")
	if _, stderr, code := runGen(t, context.Background(), append(small, "--out", again)...); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if a, b := mustRead(t, trace), mustRead(t, again); !bytes.Equal(a, b) {
		t.Error("the same flags made two different traces")
	}
	// The options the flags make, printed, are an options file making
	// the same trace.
	opts, stderr, code := runGen(t, context.Background(), append(small, "--print-options")...)
	if code != ExitOK || !strings.Contains(opts, `"flows": 3000`) {
		t.Fatalf("exit %d: %s%s", code, opts, stderr)
	}
	optFile, fromFile := filepath.Join(dir, "opts.json"), filepath.Join(dir, "file.jsonl")
	if err := os.WriteFile(optFile, []byte(opts), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runGen(t, context.Background(), "--options", optFile, "--out", fromFile); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if a, b := mustRead(t, trace), mustRead(t, fromFile); !bytes.Equal(a, b) {
		t.Error("--options of --print-options made another trace")
	}
	conn, ssl := filepath.Join(dir, "conn.log"), filepath.Join(dir, "ssl.log")
	if _, stderr, code := runGen(t, context.Background(), append(small, "--format", "zeek", "--out", conn, "--ssl-out", ssl)...); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	zf := readTrace(t, conn, ssl)
	if len(zf) != len(flows) {
		t.Fatalf("conn.log has %d flows, want %d", len(zf), len(flows))
	}
	for i, f := range zf {
		if want := flows[i]; f.Start != want.Start || f.Server != want.Server || (want.PacketsIn > 0) != (f.ServerName == want.ServerName && f.ServerName != "") {
			t.Fatalf("zeek flow %d: %+v, jsonl %+v", i, f, want)
		}
	}
	csv := filepath.Join(dir, "t.csv")
	if _, stderr, code := runGen(t, context.Background(), append(small, "--format", "nfdump", "--out", csv)...); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if nf := readTrace(t, csv, ""); len(nf) != len(flows) || nf[len(nf)-1].BytesIn != flows[len(flows)-1].BytesIn {
		t.Fatalf("nfdump CSV has %d flows, want %d like the jsonl's", len(nf), len(flows))
	}
	// A packet capture, read back by pkie replay flows: the flows come as
	// their connections end, so compare them in order of start.
	for _, format := range []string{"pcap", "pcapng"} {
		capture := filepath.Join(dir, "t."+format)
		if _, stderr, code := runGen(t, context.Background(), append(small, "--format", format, "--out", capture)...); code != ExitOK {
			t.Fatalf("%s: exit %d: %s", format, code, stderr)
		}
		code, out, stderr := runCLI(t, "replay", "flows", capture)
		if code != ExitOK {
			t.Fatalf("replay flows %s: exit %d: %s", format, code, stderr)
		}
		r := replay.NewJSONLReader(strings.NewReader(out))
		var pf []replay.Flow
		for {
			f, err := r.Next()
			if err != nil {
				break
			}
			pf = append(pf, f)
		}
		if len(pf) != len(flows) {
			t.Fatalf("%s: %d flows, want %d", format, len(pf), len(flows))
		}
		order := func(a, b replay.Flow) int {
			return cmp.Or(a.Start.Compare(b.Start), a.Client.Compare(b.Client), a.Server.Compare(b.Server), cmp.Compare(a.Duration, b.Duration))
		}
		want := slices.Clone(flows)
		slices.SortFunc(want, order)
		slices.SortFunc(pf, order)
		for i, f := range pf {
			w := want[i]
			if w.PacketsIn == 0 {
				w.ServerName = ""
			}
			if f.Start != w.Start || f.Duration != w.Duration || f.Client != w.Client || f.Server != w.Server || f.ServerName != w.ServerName || f.BytesIn != w.BytesIn {
				t.Fatalf("%s flow %d: %+v, jsonl %+v", format, i, f, w)
			}
		}
	}
}

// TestReplayGenInterrupted checks that a stopped run leaves no file, not
// even a partial one.
func TestReplayGenInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, stderr, code := runGen(t, ctx, "--flows", "100000", "--format", "zeek", "--out", filepath.Join(dir, "conn.log"),
		"--ssl-out", filepath.Join(dir, "ssl.log"), "--map", filepath.Join(dir, "map"))
	if code == ExitOK || !strings.Contains(stderr, "interrupted") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestReplayGenUsage(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "want --out"},
		{[]string{"--out", out, "--format", "zeek"}, "--ssl-out"},
		{[]string{"--out", out, "--ssl-out", out + ".ssl"}, "goes with --format zeek"},
		{[]string{"--out", out, "--format", "erf"}, "want jsonl, nfdump, zeek, pcap or pcapng"},
		{[]string{"--out", out, "--format", "pcap", "--ssl-out", out + ".ssl"}, "goes with --format zeek"},
		{[]string{"--out", out, "--scale", "0"}, "--scale"},
		{[]string{"--out", out, "--start", "noon"}, "RFC 3339"},
		{[]string{"--out", filepath.Join(dir, "no", "such", "dir")}, "--out"},
		{[]string{"--out", out, "--map", out}, "name the same file"},
		{[]string{"--out", out, "--options", filepath.Join(dir, "none.json")}, "--options"},
	} {
		_, stderr, code := runGen(t, context.Background(), tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want a usage error about %q", tc.args, code, stderr, tc.want)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestReplayGenThroughSynth feeds a generated nfdump trace and its map to
// pkie replay synth: the schedule must have the requests and dead targets
// the generator's own flows give under the paper's method (a client
// caching only answered flows), the dead ones found from the trace alone
// (their flows unanswered).
func TestReplayGenThroughSynth(t *testing.T) {
	dir := t.TempDir()
	trace, mapFile := filepath.Join(dir, "t.csv"), filepath.Join(dir, "t.map")
	if _, stderr, code := runGen(t, context.Background(), "--flows", "20000", "--clients", "100", "--seed", "3",
		"--format", "nfdump", "--out", trace, "--map", mapFile); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}

	o := gen.DefaultOptions()
	o.Flows, o.Clients, o.Seed = 20000, 100, 3
	g, err := gen.New(o)
	if err != nil {
		t.Fatal(err)
	}
	type pair struct {
		c netip.Addr
		h string
	}
	seen, targets, dead := map[pair]bool{}, map[string]bool{}, map[string]bool{}
	var named, requests int64
	for {
		f, err := g.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name, ok := g.Name(f.Server)
		if !ok {
			continue
		}
		named++
		if p := (pair{f.Client, name}); !seen[p] {
			// Only an answered flow fills the client's cache: the
			// trace counts packets both ways, so a dead host's
			// unanswered flows are each a request.
			seen[p] = f.PacketsIn > 0
			requests++
			targets[name] = true
			if g.Dead(name) {
				dead[name] = true
			}
		}
	}

	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	args := []string{"replay", "synth", "--map", mapFile, "--json", "--out", filepath.Join(dir, "s.jsonl"), trace}
	if code := Main(context.Background(), env, args); code != ExitOK {
		t.Fatalf("synth exit %d: %s", code, errb.String())
	}
	var sum struct {
		NamedMap    int64 `json:"named_map"`
		Requests    int64 `json:"requests"`
		Targets     int64 `json:"targets"`
		DeadTargets int64 `json:"dead_targets"`
	}
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("synth summary %q: %v", out.String(), err)
	}
	if sum.NamedMap != named || sum.Requests != requests || sum.Targets != int64(len(targets)) || sum.DeadTargets != int64(len(dead)) || len(dead) == 0 {
		t.Errorf("synth: %+v; the generator: %d named, %d requests, %d targets, %d dead", sum, named, requests, len(targets), len(dead))
	}
}
