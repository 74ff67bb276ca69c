package loglist

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/loglist3"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustID(t *testing.T, b64 string) [32]byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad ID %q", b64)
	}
	return [32]byte(b)
}

func TestParseChromeFixtures(t *testing.T) {
	t.Run("v93.3", func(t *testing.T) {
		l, err := Parse(readFile(t, "chrome_log_list_v93.3_google.json"))
		if err != nil {
			t.Fatal(err)
		}
		if l.Version != "93.3" || !l.Timestamp.Equal(time.Date(2026, 10, 3, 13, 35, 24, 0, time.UTC)) {
			t.Errorf("version %q timestamp %v", l.Version, l.Timestamp)
		}
		kinds := map[Kind]int{}
		for _, g := range l.Logs {
			kinds[g.Kind]++
			if g.Operator != "Google" || g.State != Usable {
				t.Errorf("%s: operator %q state %q", g.Name(), g.Operator, g.State)
			}
			if sha256.Sum256(g.SPKI) != g.ID {
				t.Errorf("%s: ID is not SHA-256 of the SPKI", g.Name())
			}
			if _, err := g.NoteVerifier(); err != nil {
				t.Errorf("%s: %v", g.Name(), err)
			}
		}
		if kinds[RFC6962] != 4 || kinds[Static] != 2 {
			t.Errorf("kinds %v; want 4 RFC 6962 and 2 static-ct-api", kinds)
		}
		py := l.Lookup(mustID(t, "HIl0B+YBCgEpO7Z439ejaM6xjMpSHcyk04bkoy5bXQQ="))
		if py == nil {
			t.Fatal("ParcelYard2027h1 not found by ID")
		}
		if py.Kind != Static || py.MMD != time.Minute ||
			py.URL != "https://parcelyard2027h1.prod.certificate.transparency.goog/" ||
			py.MonitoringURL != "https://storage.googleapis.com/parcelyard2027h1.prod.certificate.transparency.goog/" ||
			py.Origin() != "parcelyard2027h1.prod.certificate.transparency.goog" {
			t.Errorf("ParcelYard2027h1: %+v origin %q", py, py.Origin())
		}
		v, err := py.NoteVerifier()
		if err != nil || v.Name() != py.Origin() {
			t.Errorf("NoteVerifier: %v, %v", v, err)
		}
		if !py.StateSince.Equal(time.Date(2026, 8, 31, 13, 50, 0, 0, time.UTC)) {
			t.Errorf("StateSince %v", py.StateSince)
		}
		for _, c := range []struct {
			notAfter time.Time
			want     bool
		}{
			{time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), false},
			{time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), true},
			{time.Date(2027, 6, 30, 23, 59, 59, 0, time.UTC), true},
			{time.Date(2027, 7, 1, 0, 0, 0, 0, time.UTC), false},
		} {
			if got := py.Covers(c.notAfter); got != c.want {
				t.Errorf("Covers(%v) = %v; want %v", c.notAfter, got, c.want)
			}
		}
		published := time.Date(2026, 10, 3, 13, 35, 24, 0, time.UTC)
		if l.Stale(published.Add(EnforcementTimeout), EnforcementTimeout) || !l.Stale(published.Add(EnforcementTimeout+time.Second), EnforcementTimeout) {
			t.Error("Stale does not turn at 70 days")
		}
		if l.Lookup([32]byte{1}) != nil {
			t.Error("Lookup of an unknown ID found a log")
		}
	})
	t.Run("v21.16", func(t *testing.T) {
		l, err := Parse(readFile(t, "chrome_log_list_v21.16.json"))
		if err != nil {
			t.Fatal(err)
		}
		states := map[State]int{}
		for _, g := range l.Logs {
			states[g.State]++
		}
		want := map[State]int{"": 24, Rejected: 71, Retired: 7, Usable: 16}
		if len(l.Logs) != 118 || len(states) != len(want) {
			t.Fatalf("%d logs, states %v; want 118, %v", len(l.Logs), states, want)
		}
		for s, n := range want {
			if states[s] != n {
				t.Errorf("state %q: %d logs; want %d", s, states[s], n)
			}
		}
	})
}

func TestParseSigned(t *testing.T) {
	data := readFile(t, "chrome_log_list_v21.16.json")
	sig := readFile(t, "chrome_log_list_v21.16.sig")
	pub, err := ParsePublicKeyPEM(readFile(t, "chrome_log_list_pubkey.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSigned(data, sig, pub); err != nil {
		t.Fatalf("the published list and signature: %v", err)
	}
	tampered := bytes.Replace(data, []byte(`"usable"`), []byte(`"rejected"`), 1)
	badSig := append([]byte(nil), sig...)
	badSig[10] ^= 1
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, c := range []struct {
		name      string
		data, sig []byte
		pub       any
	}{
		{"tampered list", tampered, sig, pub},
		{"flipped signature bit", data, badSig, pub},
		{"another key", data, sig, &other.PublicKey},
		{"no signature", data, nil, pub},
		{"no key", data, sig, nil},
	} {
		if _, err := ParseSigned(c.data, c.sig, c.pub); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// TestParseApple reads a list in Apple's shape: Chrome's v3 schema with
// assetVersion and assetVersionV2 at the top and a version in each state
// (Apple's log_list_schema_v4.json), built from the Chrome fixture.
func TestParseApple(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(readFile(t, "chrome_log_list_v93.3_google.json"), &doc); err != nil {
		t.Fatal(err)
	}
	doc["assetVersion"] = 32
	doc["assetVersionV2"] = 1013
	doc["$schema"] = "https://valid.apple.com/ct/log_list/schema_versions/log_list_schema_v4.json"
	for _, op := range doc["operators"].([]any) {
		for _, field := range []string{"logs", "tiled_logs"} {
			for _, lg := range op.(map[string]any)[field].([]any) {
				for _, st := range lg.(map[string]any)["state"].(map[string]any) {
					st.(map[string]any)["version"] = "1013"
				}
			}
		}
	}
	apple, _ := json.Marshal(doc)
	a, err := Parse(apple)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := Parse(readFile(t, "chrome_log_list_v93.3_google.json"))
	if len(a.Logs) != len(c.Logs) {
		t.Fatalf("%d logs; want %d", len(a.Logs), len(c.Logs))
	}
	for i := range a.Logs {
		if a.Logs[i].ID != c.Logs[i].ID || a.Logs[i].State != c.Logs[i].State || !a.Logs[i].StateSince.Equal(c.Logs[i].StateSince) {
			t.Errorf("log %d differs: %+v vs %+v", i, a.Logs[i], c.Logs[i])
		}
	}
}

// listJSON is a one-log v3 list whose log fields can be overridden.
func listJSON(t *testing.T, override func(lg map[string]any, op map[string]any)) []byte {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	spki, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	id := sha256.Sum256(spki)
	lg := map[string]any{
		"description": "Test log", "log_id": id[:], "key": spki, "url": "https://ct.example/log/", "mmd": 86400,
		"state": map[string]any{"usable": map[string]any{"timestamp": "2026-01-01T00:00:00Z"}},
	}
	op := map[string]any{"name": "Test", "email": []string{"x@example"}, "logs": []any{lg}}
	if override != nil {
		override(lg, op)
	}
	b, err := json.Marshal(map[string]any{"version": "1", "log_list_timestamp": "2026-11-01T00:00:00Z", "operators": []any{op}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseExpired reads the Expired state Apple proposed, which loglist3
// drops.
func TestParseExpired(t *testing.T) {
	data := listJSON(t, func(lg, _ map[string]any) {
		lg["state"] = map[string]any{"expired": map[string]any{"timestamp": "2026-07-01T00:00:00Z", "version": "1013"}}
	})
	l, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if g := l.Logs[0]; g.State != Expired || !g.StateSince.Equal(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("state %q since %v; want expired since 2026-07-01", g.State, g.StateSince)
	}
	if _, err := Write(l.Logs, l.Timestamp); err == nil {
		t.Error("Write wrote an expired log into the v3 schema")
	}
}

func TestParseRefuses(t *testing.T) {
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384SPKI, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	rsaSPKI, _ := x509.MarshalPKIXPublicKey(&rsa1024.PublicKey)
	withKey := func(spki []byte) func(lg, op map[string]any) {
		return func(lg, _ map[string]any) {
			id := sha256.Sum256(spki)
			lg["key"], lg["log_id"] = spki, id[:]
		}
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"log_id not SHA-256 of key", listJSON(t, func(lg, _ map[string]any) { lg["log_id"] = make([]byte, 32) }), "not SHA-256 of its key"},
		{"short log_id", listJSON(t, func(lg, _ map[string]any) { lg["log_id"] = []byte{1, 2} }), "2-byte log_id"},
		{"no key", listJSON(t, func(lg, _ map[string]any) { delete(lg, "key") }), "no key"},
		{"P-384 key", listJSON(t, withKey(p384SPKI)), "want P-256"},
		{"RSA-1024 key", listJSON(t, withKey(rsaSPKI)), "RSA-1024"},
		{"duplicate ID", listJSON(t, func(lg, op map[string]any) { op["logs"] = []any{lg, lg} }), "same ID"},
		{"two states", listJSON(t, func(lg, _ map[string]any) {
			lg["state"] = map[string]any{"usable": map[string]any{"timestamp": "2026-01-01T00:00:00Z"},
				"retired": map[string]any{"timestamp": "2026-02-01T00:00:00Z"}}
		}), "2 states"},
		{"empty temporal interval", listJSON(t, func(lg, _ map[string]any) {
			lg["temporal_interval"] = map[string]any{"start_inclusive": "2027-01-01T00:00:00Z", "end_exclusive": "2027-01-01T00:00:00Z"}
		}), "is empty"},
		{"expired and usable", listJSON(t, func(lg, _ map[string]any) {
			lg["state"] = map[string]any{"usable": map[string]any{"timestamp": "2026-01-01T00:00:00Z"},
				"expired": map[string]any{"timestamp": "2026-02-01T00:00:00Z", "version": "7"}}
		}), "2 states"},
		{"expired state not an object", listJSON(t, func(lg, _ map[string]any) {
			lg["state"] = map[string]any{"expired": "2026-02-01"}
		}), "reading states"},
		{"negative mmd", listJSON(t, func(lg, _ map[string]any) { lg["mmd"] = -1 }), "negative mmd"},
		{"no operator name", listJSON(t, func(_, op map[string]any) { op["name"] = " " }), "has no name"},
		{"url not http", listJSON(t, func(lg, _ map[string]any) { lg["url"] = "ftp://ct.example/" }), "not an http(s) URL"},
		{"no url", listJSON(t, func(lg, _ map[string]any) { delete(lg, "url") }), "url: missing"},
		{"tiled log without monitoring_url", listJSON(t, func(lg, op map[string]any) {
			lg["submission_url"] = lg["url"]
			op["logs"], op["tiled_logs"] = []any{}, []any{lg}
		}), "monitoring_url: missing"},
		{"timestamps in milliseconds (Android's format)", []byte(`{"version":"85.28","log_list_timestamp":1774619093000,"operators":[]}`), "loglist:"},
		{"not JSON", []byte("<html>"), "loglist:"},
		{"too large", make([]byte, MaxListSize+1), "exceeds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse: %v; want an error containing %q", err, c.want)
			}
		})
	}
}

func genLogs(t *testing.T) []*Log {
	t.Helper()
	var logs []*Log
	for i, c := range []struct {
		desc, op string
		kind     Kind
		state    State
		rsa      bool
	}{
		{"A log", "Operator A", Static, Usable, false},
		{"B log", "Operator B", RFC6962, Qualified, false},
		{"A rsa log", "Operator A", RFC6962, Retired, true},
		{"C log", "Operator C", Static, ReadOnly, false},
	} {
		var key any
		if c.rsa {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				t.Fatal(err)
			}
			key = &k.PublicKey
		} else {
			k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			key = &k.PublicKey
		}
		l := &Log{Key: key, Description: c.desc, Operator: c.op, Kind: c.kind, URL: "http://127.0.0.1:1/" + c.desc[:1] + "/",
			MMD: time.Duration(i+1) * time.Minute, State: c.state, StateSince: time.Date(2026, 1, i+1, 0, 0, 0, 0, time.UTC)}
		if c.kind == Static {
			l.MonitoringURL = "http://127.0.0.1:2/" + c.desc[:1] + "/"
		}
		if i == 0 {
			l.NotAfterStart = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
			l.NotAfterEnd = time.Date(2027, 7, 1, 0, 0, 0, 0, time.UTC)
			l.PreviousOperators = []PreviousOperator{{Name: "Old A", End: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)}}
		}
		if c.state == ReadOnly {
			l.FinalTreeSize = 1234
			l.FinalRootHash = sha256.Sum256([]byte("root"))
		}
		logs = append(logs, l)
	}
	return logs
}

func TestWriteRoundTrip(t *testing.T) {
	logs := genLogs(t)
	ts := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	data, err := Write(logs, ts)
	if err != nil {
		t.Fatal(err)
	}
	// loglist3, the reference reader, sees the static-ct-api logs under
	// tiled_logs and the RFC 6962 ones under logs.
	ll3, err := loglist3.NewFromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(ll3.Operators) != 3 || len(ll3.Operators[0].TiledLogs) != 1 || len(ll3.Operators[0].Logs) != 1 {
		t.Fatalf("loglist3 reads %d operators; first has %d tiled and %d RFC 6962 logs", len(ll3.Operators),
			len(ll3.Operators[0].TiledLogs), len(ll3.Operators[0].Logs))
	}
	l, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Timestamp.Equal(ts) || len(l.Logs) != len(logs) {
		t.Fatalf("timestamp %v, %d logs", l.Timestamp, len(l.Logs))
	}
	for _, want := range logs {
		spki, _ := x509.MarshalPKIXPublicKey(want.Key)
		got := l.Lookup(sha256.Sum256(spki))
		if got == nil {
			t.Fatalf("%s: not read back", want.Description)
		}
		if got.Description != want.Description || got.Operator != want.Operator || got.Kind != want.Kind ||
			got.URL != want.URL || got.MonitoringURL != want.MonitoringURL || got.MMD != want.MMD ||
			got.State != want.State || !got.StateSince.Equal(want.StateSince) ||
			!got.NotAfterStart.Equal(want.NotAfterStart) || !got.NotAfterEnd.Equal(want.NotAfterEnd) ||
			got.FinalTreeSize != want.FinalTreeSize || got.FinalRootHash != want.FinalRootHash ||
			len(got.PreviousOperators) != len(want.PreviousOperators) {
			t.Errorf("read back %+v\nwant %+v", got, want)
		}
	}
	spkiA, _ := x509.MarshalPKIXPublicKey(logs[0].Key)
	a := l.Lookup(sha256.Sum256(spkiA))
	if a.OperatorAt(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) != "Old A" || a.OperatorAt(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)) != "Operator A" {
		t.Error("OperatorAt does not follow previous_operators")
	}

	bad := genLogs(t)[:1]
	bad[0].Kind = "x"
	if _, err := Write(bad, ts); err == nil {
		t.Error("Write accepted a log of unknown kind")
	}
	dup := genLogs(t)[:1]
	if _, err := Write([]*Log{dup[0], dup[0]}, ts); err == nil || !strings.Contains(err.Error(), "same ID") {
		t.Errorf("Write of a duplicate log: %v", err)
	}
}

func TestLoad(t *testing.T) {
	data := readFile(t, "chrome_log_list_v21.16.json")
	sig := readFile(t, "chrome_log_list_v21.16.sig")
	pub, _ := ParsePublicKeyPEM(readFile(t, "chrome_log_list_pubkey.pem"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/log_list.json":
			w.Write(data)
		case "/log_list.sig":
			w.Write(sig)
		case "/huge.json":
			w.Write(make([]byte, MaxListSize+10))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	file := filepath.Join("testdata", "chrome_log_list_v21.16.json")
	for _, c := range []struct {
		name, src string
		o         LoadOptions
		want      string // "" for success, else part of the error
	}{
		{"file", file, LoadOptions{}, ""},
		{"file, signature file", file, LoadOptions{Signature: filepath.Join("testdata", "chrome_log_list_v21.16.sig"), PublicKey: pub}, ""},
		{"URL, signature URL", srv.URL + "/log_list.json", LoadOptions{Signature: srv.URL + "/log_list.sig", PublicKey: pub}, ""},
		{"URL", srv.URL + "/log_list.json", LoadOptions{}, ""},
		{"signature of another list", filepath.Join("testdata", "chrome_log_list_v93.3_google.json"), LoadOptions{Signature: srv.URL + "/log_list.sig", PublicKey: pub}, "signature"},
		{"signature without key", file, LoadOptions{Signature: srv.URL + "/log_list.sig"}, "no public key"},
		{"key without signature", file, LoadOptions{PublicKey: pub}, "no signature"},
		{"404", srv.URL + "/nothing.json", LoadOptions{}, "404"},
		{"too large", srv.URL + "/huge.json", LoadOptions{}, "exceeds"},
		{"missing file", filepath.Join("testdata", "nothing.json"), LoadOptions{}, "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := Load(ctx, srv.Client(), c.src, c.o)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if l.Source != c.src || len(l.Logs) != 118 {
					t.Errorf("source %q, %d logs", l.Source, len(l.Logs))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load: %v; want an error containing %q", err, c.want)
			}
		})
	}
}

// FuzzParse is seeded with the small real list only: the fuzzer spends
// minutes minimizing each new input grown from the 70 kB one (run with
// -fuzzminimizetime 1s to include it), which TestParseChromeFixtures reads.
func FuzzParse(f *testing.F) {
	f.Add(readFile(f, "chrome_log_list_v93.3_google.json"))
	f.Add([]byte(`{"version":"1","log_list_timestamp":"2026-01-01T00:00:00Z","operators":[{"name":"x","email":[],"logs":[],"tiled_logs":[]}]}`))
	f.Add([]byte(`{"operators":[{"name":"x","logs":[{"log_id":"","key":"","url":"","mmd":1}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse(data)
		if err != nil {
			return
		}
		for _, g := range l.Logs {
			if sha256.Sum256(g.SPKI) != g.ID || l.Lookup(g.ID) != g || g.Key == nil || g.Operator == "" {
				t.Fatalf("log %q accepted inconsistent", g.Description)
			}
		}
		// Whatever Parse accepts, Write writes back to an equal list, except
		// Apple's expired state, which the v3 schema has no place for.
		for _, g := range l.Logs {
			if g.State == Expired {
				return
			}
		}
		out, err := Write(l.Logs, l.Timestamp)
		if err != nil {
			t.Fatalf("Write of a parsed list: %v", err)
		}
		l2, err := Parse(out)
		if err != nil || len(l2.Logs) != len(l.Logs) {
			t.Fatalf("round trip: %v", err)
		}
		for i := range l.Logs {
			a, b := l.Logs[i], l2.Lookup(l.Logs[i].ID)
			if b == nil || a.State != b.State || a.Operator != b.Operator || a.URL != b.URL || a.MMD != b.MMD {
				t.Fatalf("round trip changed log %q", a.Description)
			}
		}
	})
}

// TestParseReal2026Lists: Apple's current list and Chrome's signed list of
// all logs as both stood on 2026-08-22, with their RFC 6962 and
// static-ct-api logs, states and (for Chrome's) Google's signature.
func TestParseReal2026Lists(t *testing.T) {
	apple, err := Parse(readFile(t, "apple_current_log_list_2026-08-22.json"))
	if err != nil {
		t.Fatalf("Apple's list: %v", err)
	}
	count := func(l *List) (kinds map[Kind]int, states map[State]int) {
		kinds, states = map[Kind]int{}, map[State]int{}
		for _, g := range l.Logs {
			kinds[g.Kind]++
			states[g.State]++
		}
		return kinds, states
	}
	kinds, states := count(apple)
	if kinds[RFC6962] != 135 || kinds[Static] != 31 {
		t.Errorf("Apple's list: %v logs by kind, want 135 RFC 6962 and 31 static-ct-api", kinds)
	}
	if states[Usable] != 51 || states[ReadOnly] != 6 || states[Rejected] != 108 || states[Pending] != 1 {
		t.Errorf("Apple's list: %v logs by state, want 51 usable, 6 readonly, 108 rejected, 1 pending", states)
	}
	pub, err := ParsePublicKeyPEM(readFile(t, "chrome_log_list_pubkey.pem"))
	if err != nil {
		t.Fatal(err)
	}
	data, sig := readFile(t, "chrome_all_logs_list_2026-08-22.json"), readFile(t, "chrome_all_logs_list_2026-08-22.sig")
	chrome, err := ParseSigned(data, sig, pub)
	if err != nil {
		t.Fatalf("Chrome's signed list: %v", err)
	}
	if kinds, _ := count(chrome); chrome.Version != "89.25" || kinds[RFC6962] != 42 || kinds[Static] != 75 {
		t.Errorf("Chrome's list: version %s, %v logs by kind; want 89.25 with 42 RFC 6962 and 75 static-ct-api", chrome.Version, kinds)
	}
	tampered := bytes.Replace(data, []byte(`"usable"`), []byte(`"retired"`), 1)
	if _, err := ParseSigned(tampered, sig, pub); err == nil {
		t.Error("Chrome's list with one state changed passed its signature check")
	}
}
