package corpus

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/verify"
)

// The fixture is pkie's own, in x509-limbo's schema (limbo-schema.json,
// version 1): a root, three leaves issued in 2025 valid to 2030, and cases
// that run and that are skipped.
func TestReadLimboFixture(t *testing.T) {
	data, err := os.ReadFile("testdata/limbo-fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c, err := ReadLimbo(bytes.NewReader(data), now)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		host    string
		purpose verify.Purpose
		expect  Expect
		time    string
		soft    bool
	}
	wantCases := map[string]want{
		"limbo#pkie::server-dns-ok":      {"example.com", verify.Server, Accept, "2026-01-01T00:00:00Z", false},
		"limbo#pkie::server-ip-mismatch": {"192.0.2.2", verify.Server, Reject, "2026-01-01T00:00:00Z", false},
		"limbo#pkie::server-expired":     {"example.com", verify.Server, Reject, "2031-01-01T00:00:00Z", false},
		"limbo#pkie::client-now":         {"", verify.Client, Accept, "now", false},
		"limbo#pkie::pedantic-soft":      {"", verify.Server, Accept, "2026-01-01T00:00:00Z", true},
	}
	wantSkips := map[string]string{
		"limbo#pkie::skip-max-depth":   "max_chain_depth",
		"limbo#pkie::skip-sigalg":      "signature_algorithms filter",
		"limbo#pkie::skip-rfc822":      "peer name of kind RFC822",
		"limbo#pkie::skip-codesigning": "extended_key_usage codeSigning for SERVER",
	}
	if len(c.Cases) != len(wantCases) || len(c.Skipped) != len(wantSkips) {
		t.Fatalf("%d cases, %d skipped: %+v", len(c.Cases), len(c.Skipped), c.Skipped)
	}
	for _, k := range c.Cases {
		w, ok := wantCases[k.ID]
		if !ok {
			t.Errorf("unexpected case %s", k.ID)
			continue
		}
		at := k.Time.UTC().Format(time.RFC3339)
		if w.time == "now" && k.Time.Equal(now) {
			at = "now"
		}
		if k.Host != w.host || k.Purpose != w.purpose || k.Expect != w.expect || at != w.time || k.Soft != w.soft ||
			k.Source != LimboSource || len(k.Roots) != 1 || len(k.Chain) != 1 || !strings.HasPrefix(k.Note, "pkie fixture") {
			t.Errorf("%s: %+v, want %+v", k.ID, k, w)
		}
	}
	for _, s := range c.Skipped {
		if wantSkips[s.ID] != s.Reason {
			t.Errorf("skip %s: %q, want %q", s.ID, s.Reason, wantSkips[s.ID])
		}
	}
	// The expectations are right: crypto/x509 agrees with every case.
	rep := Run(context.Background(), []verify.Backend{verify.NewGo(false)}, c.Cases, nil)
	if tt := rep.Backends[0].Total; tt.Agree != len(c.Cases) {
		var b bytes.Buffer
		rep.WriteText(&b, -1)
		t.Errorf("go: %+v\n%s", tt, b.String())
	}
}

func TestReadLimboRejects(t *testing.T) {
	for _, bad := range []string{"", "[]", `{"version":2,"testcases":[]}`, `{"version":"1"}`} {
		if _, err := ReadLimbo(strings.NewReader(bad), time.Now()); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c, err := ReadLimbo(strings.NewReader(`{"version":1,"testcases":[
		{"id":"a","validation_kind":"SERVER","expected_result":"SUCCESS","peer_certificate":"junk","trusted_certs":[]},
		{"id":"b","validation_kind":"SERVER","expected_result":"MAYBE"},
		{"id":"c","validation_kind":"EMAIL","expected_result":"SUCCESS"},
		{"id":"d","validation_kind":"SERVER","expected_result":"SUCCESS","validation_time":"yesterday"}]}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"peer_certificate: not a PEM certificate", `expected_result "MAYBE"`, `validation_kind "EMAIL"`, "validation_time is not RFC 3339"}
	if len(c.Cases) != 0 || len(c.Skipped) != len(want) {
		t.Fatalf("%d cases, skipped %+v", len(c.Cases), c.Skipped)
	}
	for i, s := range c.Skipped {
		if s.Reason != want[i] {
			t.Errorf("skip %d: %q, want %q", i, s.Reason, want[i])
		}
	}
}

// FuzzReadLimbo: a limbo file is untrusted input; the reader returns cases
// that are valid requests, with an expectation, or skips, or an error.
func FuzzReadLimbo(f *testing.F) {
	if data, err := os.ReadFile("testdata/limbo-fixture.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"version":1,"testcases":[{"id":"x","validation_kind":"CLIENT","expected_result":"FAILURE","expected_peer_names":[{"kind":"IP","value":"::1"}],"peer_certificate":"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n","trusted_certs":["-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"]}]}`))
	now := time.Unix(1763856000, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadLimbo(bytes.NewReader(data), now)
		if err != nil {
			return
		}
		for _, k := range c.Cases {
			if err := k.Request().Check(); err != nil {
				t.Fatalf("case %s is not a valid request: %v", k.ID, err)
			}
			if k.Expect != Accept && k.Expect != Reject {
				t.Fatalf("case %s expects %q", k.ID, k.Expect)
			}
		}
		for _, s := range c.Skipped {
			if s.Reason == "" {
				t.Fatalf("skip %s without a reason", s.ID)
			}
		}
	})
}
