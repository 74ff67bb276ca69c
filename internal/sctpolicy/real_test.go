package sctpolicy

import (
	"crypto/sha256"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/sct"
)

// TestRealCertificate judges a real certificate (*.google.com, issued
// 2025-07-07, SCTs embedded from Google 'Xenon2025h2' and DigiCert
// 'Yeti2025'; internal/sct/testdata/README.md) against Chrome's real log
// list v21.16 (2023-06-01; internal/loglist/testdata/README.md), which has
// Yeti2025 but not yet Xenon2025h2, and against that list with
// Xenon2025h2 added from its real key.
func TestRealCertificate(t *testing.T) {
	read := func(path ...string) []byte {
		b, err := os.ReadFile(filepath.Join(path...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dir := filepath.Join("..", "sct", "testdata", "google2025")
	leaf, err := x509.ParseCertificate(read(dir, "leaf_google-cert.bin"))
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := x509.ParseCertificate(read(dir, "issuer_google-cert.bin"))
	if err != nil {
		t.Fatal(err)
	}
	list2023, err := loglist.Parse(read("..", "loglist", "testdata", "chrome_log_list_v21.16.json"))
	if err != nil {
		t.Fatal(err)
	}
	xenonSPKI := read(dir, "log0-pubkey.bin")
	xenonKey, err := x509.ParsePKIXPublicKey(xenonSPKI)
	if err != nil {
		t.Fatal(err)
	}
	xenon := &loglist.Log{Key: xenonKey, Description: "Google 'Xenon2025h2' log", Operator: "Google", Kind: loglist.RFC6962,
		URL: "https://ct.googleapis.com/logs/eu1/xenon2025h2/", MMD: 24 * time.Hour, State: loglist.Usable,
		StateSince:    time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfterStart: time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC), NotAfterEnd: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	data, err := loglist.Write(append(append([]*loglist.Log(nil), list2023.Logs...), xenon), time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	withXenon, err := loglist.Parse(data)
	if err != nil {
		t.Fatal(err)
	}

	apple2026, err := loglist.Parse(read("..", "loglist", "testdata", "apple_current_log_list_2026-08-22.json"))
	if err != nil {
		t.Fatal(err)
	}
	chrome2026, err := loglist.Parse(read("..", "loglist", "testdata", "chrome_all_logs_list_2026-08-22.json"))
	if err != nil {
		t.Fatal(err)
	}

	scts, errs := sct.Collect(leaf, nil, nil)
	if len(errs) != 0 || len(scts) != 2 {
		t.Fatalf("%d SCTs, errors %v", len(scts), errs)
	}
	check := func(list *loglist.List, tamper bool) []Checked {
		var out []Checked
		for _, s := range scts {
			c := Checked{SCT: s, Log: list.Lookup(s.LogID)}
			if c.Log != nil {
				e, err := sct.EntryFor(s, leaf, issuer)
				if err != nil {
					t.Fatal(err)
				}
				if tamper {
					cp := *s
					cp.Timestamp++
					s = &cp
				}
				c.Err = sct.Verify(s, e, c.Log.Key)
			}
			out = append(out, c)
		}
		return out
	}
	now := leaf.NotBefore.Add(7 * 24 * time.Hour)
	xenonID := sha256.Sum256(xenonSPKI)
	for _, c := range []struct {
		name   string
		list   *loglist.List
		tamper bool
		policy Policy
		ok     bool
		reason string
	}{
		{"chrome, 2023 list", list2023, false, Chrome(), false, "from log " + loglist.ShortID(xenonID) + ", not in the log list"},
		{"apple, 2023 list", list2023, false, Apple(), false, "not in the log list"},
		{"one, 2023 list", list2023, false, One(), true, "1 valid SCT"},
		{"chrome, with Xenon2025h2", withXenon, false, Chrome(), true, "2 valid embedded SCTs from 2 logs of 2 operators for a 84-day certificate"},
		{"apple, with Xenon2025h2", withXenon, false, Apple(), true, "2 valid embedded SCTs"},
		{"chrome, SCTs altered", withXenon, true, Chrome(), false, "has an invalid signature"},
		// The lists of August 2026, after the 2025 shards' intervals
		// ended: Chrome's has dropped Xenon2025h2, Apple's marks it and
		// Yeti2025 rejected (January 2026). Neither list can vouch for
		// the certificate any more, and the reasons say why.
		{"chrome, Chrome's 2026 list of all logs", chrome2026, false, Chrome(), false, "from log " + loglist.ShortID(xenonID) + ", not in the log list"},
		{"apple, Apple's 2026 list", apple2026, false, Apple(), false, "Google 'Xenon 2025H2' log does not count: the log is rejected"},
		{"apple, Apple's 2026 list, SCTs altered", apple2026, true, Apple(), false, "has an invalid signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.policy.Evaluate(leaf, check(c.list, c.tamper), now)
			if r.Compliant != c.ok || !strings.Contains(r.Reason, c.reason) {
				t.Errorf("%+v; want compliant %v, reason containing %q", r, c.ok, c.reason)
			}
		})
	}
}
