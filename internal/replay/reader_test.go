package replay

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readAll drains a reader, failing the test on any error but io.EOF.
func drainFlows(t testing.TB, r Reader) []Flow {
	t.Helper()
	var out []Flow
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, f)
	}
}

func openFixture(t *testing.T, name, format string, opt Options) Reader {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	r, err := Open(f, format, opt)
	if err != nil {
		t.Fatalf("Open %s: %v", name, err)
	}
	return r
}

func openSSL(t *testing.T, name string) io.Reader {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

var (
	addr = netip.MustParseAddr
	t0   = time.Date(2014, 3, 1, 10, 0, 0, 0, time.UTC)
)

func TestReplayZeek(t *testing.T) {
	first := Flow{
		Start: t0.Add(123456 * time.Microsecond), Duration: 2500 * time.Millisecond,
		Client: addr("10.0.0.1"), Server: addr("93.184.216.34"), Port: 443, ServerName: "example.com",
		BytesOut: 1141, BytesIn: 4843, PacketsOut: 12, PacketsIn: 10,
	}
	for _, enc := range []struct{ conn, ssl string }{{"conn.log", "ssl.log"}, {"conn.json", "ssl.json"}} {
		for _, tc := range []struct {
			name                               string
			ports                              []uint16
			ssl                                bool
			kept, named, read, malformed, snis int64
			sni                                []string
		}{
			{"default port", nil, true, 3, 1, 6, 1, 3, []string{"example.com", "", ""}},
			{"443 and 8443", []uint16{443, 8443}, true, 4, 2, 6, 1, 3, []string{"example.com", "", "", "www.example.org"}},
			{"no ssl.log", nil, false, 3, 0, 6, 1, 0, []string{"", "", ""}},
		} {
			t.Run(enc.conn+"/"+tc.name, func(t *testing.T) {
				opt := Options{Ports: tc.ports}
				if tc.ssl {
					opt.ZeekSSL = openSSL(t, enc.ssl)
				}
				r := openFixture(t, enc.conn, FormatAuto, opt)
				flows := drainFlows(t, r)
				st := r.Stats()
				if st.Kept != tc.kept || st.Named != tc.named || st.Read != tc.read || st.Malformed != tc.malformed || st.SNIEntries != tc.snis {
					t.Errorf("stats %+v, want kept %d named %d read %d malformed %d sni entries %d", st, tc.kept, tc.named, tc.read, tc.malformed, tc.snis)
				}
				if !strings.Contains(st.FirstError, "not-an-ip") {
					t.Errorf("first error %q does not name the bad address", st.FirstError)
				}
				var snis []string
				for _, f := range flows {
					snis = append(snis, f.ServerName)
				}
				if strings.Join(snis, ",") != strings.Join(tc.sni, ",") {
					t.Errorf("server names %q, want %q", snis, tc.sni)
				}
				want := first
				if !tc.ssl {
					want.ServerName = ""
				}
				if len(flows) > 0 && flows[0] != want {
					t.Errorf("first flow\n got %+v\nwant %+v", flows[0], want)
				}
				// C5's duration and bytes are unset ("-" or absent).
				if len(flows) > 2 && (flows[2].Duration != 0 || flows[2].PacketsOut != 3 || flows[2].BytesOut != 180) {
					t.Errorf("C5 flow %+v", flows[2])
				}
			})
		}
	}
}

func TestReplayZeekSNIBound(t *testing.T) {
	r := openFixture(t, "conn.log", FormatZeek, Options{Ports: []uint16{443, 8443}, ZeekSSL: openSSL(t, "ssl.log"), MaxSNI: 1})
	flows := drainFlows(t, r)
	st := r.Stats()
	// ssl.log names C1, C6 and an orphan: the first fits, two are dropped.
	if st.SNIEntries != 1 || st.SNIDropped != 2 || st.Named != 1 {
		t.Fatalf("stats %+v, want 1 entry, 2 dropped, 1 named", st)
	}
	if flows[0].ServerName != "example.com" || flows[3].ServerName != "" {
		t.Fatalf("names %q %q", flows[0].ServerName, flows[3].ServerName)
	}
}

func TestReplayNfdump(t *testing.T) {
	for _, tc := range []struct {
		file                  string
		ports                 []uint16
		read, kept, malformed int64
		first                 Flow
	}{
		{"nfdump-1.6.csv", nil, 6, 2, 1, Flow{Start: t0, Duration: 2500 * time.Millisecond,
			Client: addr("10.0.0.1"), Server: addr("93.184.216.34"), Port: 443, BytesOut: 1141, PacketsOut: 12}},
		{"nfdump-1.6.csv", []uint16{443, 8443}, 6, 3, 1, Flow{Start: t0, Duration: 2500 * time.Millisecond,
			Client: addr("10.0.0.1"), Server: addr("93.184.216.34"), Port: 443, BytesOut: 1141, PacketsOut: 12}},
		{"nfdump-1.7-csv-fast.csv", nil, 4, 2, 0, Flow{Start: t0, Duration: 2500 * time.Millisecond,
			Client: addr("10.0.0.1"), Server: addr("93.184.216.34"), Port: 443, BytesOut: 1141, PacketsOut: 12}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := openFixture(t, tc.file, FormatAuto, Options{Ports: tc.ports})
			flows := drainFlows(t, r)
			st := r.Stats()
			if st.Read != tc.read || st.Kept != tc.kept || st.Malformed != tc.malformed || st.Named != 0 {
				t.Fatalf("stats %+v, want read %d kept %d malformed %d", st, tc.read, tc.kept, tc.malformed)
			}
			if len(flows) == 0 || flows[0] != tc.first {
				t.Fatalf("first flow %+v, want %+v", flows, tc.first)
			}
			last := flows[len(flows)-1]
			if len(tc.ports) > 0 && (last.Port != 8443 || last.Client != addr("2001:db8::1")) {
				t.Fatalf("last flow %+v, want the IPv6 one to 8443", last)
			}
		})
	}
}

func TestReplayJSONLRoundTrip(t *testing.T) {
	r := openFixture(t, "conn.log", FormatZeek, Options{Ports: []uint16{443, 8443}, ZeekSSL: openSSL(t, "ssl.log")})
	flows := drainFlows(t, r)
	var buf bytes.Buffer
	w := NewJSONLWriter(&buf)
	for _, f := range flows {
		if err := w.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(buf.String(), "\n")
	const want = `{"start":"2014-03-01T10:00:00.123456Z","duration_ns":2500000000,"client":"10.0.0.1","server":"93.184.216.34","port":443,"sni":"example.com","bytes_out":1141,"bytes_in":4843,"packets_out":12,"packets_in":10}`
	if line != want {
		t.Fatalf("first line\n got %s\nwant %s", line, want)
	}
	// A malformed line in the middle is counted and skipped.
	in := buf.String() + "{not json\n" + `{"start":"2014-03-01T10:00:00Z","client":"10.0.0.1","port":443}` + "\n\n" + line + "\n"
	jr, err := Open(strings.NewReader(in), FormatAuto, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := drainFlows(t, jr)
	st := jr.Stats()
	if len(got) != len(flows)+1 || st.Malformed != 2 || st.Kept != int64(len(flows)+1) || st.Named != 3 {
		t.Fatalf("read back %d flows, stats %+v; want %d, 2 malformed, 3 named", len(got), st, len(flows)+1)
	}
	if !strings.HasPrefix(st.FirstError, "line 5:") {
		t.Fatalf("first error %q, want line 5", st.FirstError)
	}
	for i := range flows {
		if got[i] != flows[i] {
			t.Fatalf("flow %d: got %+v want %+v", i, got[i], flows[i])
		}
	}
}

func TestReplayJSONLLongLine(t *testing.T) {
	in := strings.Repeat("x", MaxLine+10) + "\n"
	r := NewJSONLReader(strings.NewReader(in))
	if _, err := r.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("Next on an over-long line: %v, want an error", err)
	}
	if r.Stats().Malformed != 1 {
		t.Fatalf("stats %+v", r.Stats())
	}
}

func TestReplaySniff(t *testing.T) {
	for _, tc := range []struct{ head, want string }{
		{"\xd4\xc3\xb2\xa1\x02\x00", FormatPCAP},
		{"\x0a\x0d\x0d\x0a", FormatPCAP},
		{"#separator \\x09\n#set_separator\t,", FormatZeek},
		{`{"ts":1.5,"uid":"C1","id.orig_h":"10.0.0.1"}`, FormatZeek},
		{`{"start":"2014-03-01T10:00:00Z","client":"10.0.0.1"}`, FormatJSONL},
		{"ts,te,td,sa,da,sp,dp,pr,flg\n", FormatNfdump},
		{"cnt,af,firstSeen,lastSeen,proto,srcAddr,srcPort,dstAddr,dstPort\n", FormatNfdump},
		{"hello, world\n", ""},
	} {
		if got := Sniff([]byte(tc.head)); got != tc.want {
			t.Errorf("Sniff(%q) = %q, want %q", tc.head, got, tc.want)
		}
	}
	if _, err := Open(strings.NewReader("hello\n"), FormatAuto, Options{}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Open of an unknown format: %v", err)
	}
}
