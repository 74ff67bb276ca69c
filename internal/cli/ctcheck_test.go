package cli

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/sctpolicy"
	"github.com/pkie/pkie/internal/sctworld"
	"github.com/pkie/pkie/internal/testbed"
)

// TestCTCheck runs "pkie ct check" on the SCT world's certificates (two
// listed pkie logs of two operators, one unlisted): compliant with
// Chrome's policy where every listed log's SCT is there, embedded, in the
// TLS extension or in a stapled OCSP response; not compliant, with the
// policy named, for a forged SCT, an unlisted log's and a lone one;
// --inclusion finds the entries included, and once a log is down says
// unknown, naming it, and still exits 0.
func TestCTCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := sctworld.New(ctx, sctworld.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	chainPEM := func(site string) string {
		var b []byte
		for _, der := range w.Site(site).Leaf.Chain {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
		}
		return write(site+".pem", b)
	}
	leafPEM := func(site string) string {
		return write(site+".leaf.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.Site(site).Leaf.Chain[0]}))
	}
	list, err := sctworld.MarshalSCTList(w.Site(sctworld.TLS).SCTs)
	if err != nil {
		t.Fatal(err)
	}
	sctList := write("tls.scts", list)
	ocspResp := write("ocsp.der", w.Site(sctworld.OCSP).OCSP)

	type report struct {
		Policy    string `json:"policy"`
		Compliant bool   `json:"compliant"`
		Reason    string `json:"reason"`
		SCTs      []struct {
			Source    string `json:"source"`
			Valid     bool   `json:"valid"`
			Listed    bool   `json:"listed"`
			Counted   bool   `json:"counted"`
			Error     string `json:"error"`
			Inclusion *struct {
				Status   string `json:"status"`
				TreeSize uint64 `json:"tree_size"`
				Detail   string `json:"detail"`
			} `json:"inclusion"`
		} `json:"scts"`
	}
	run := func(args ...string) (int, report, string, string) {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"ct", "check", "--log-list", w.ListPath}, args...)...)
		var r report
		if strings.Contains(strings.Join(args, " "), "--json") && code != 2 {
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("pkie ct check %v: exit %d, %v\n%s\n%s", args, code, err, out, errs)
			}
		}
		return code, r, out, errs
	}

	tests := []struct {
		name    string
		args    []string
		code    int
		sources string // the SCTs' sources, in order
		valid   string // "v" valid, "x" invalid, "u" unlisted, per SCT
		reason  string // in the policy's reason, when not compliant
	}{
		{"embedded, two operators", []string{chainPEM(sctworld.Good)}, 0, "embedded,embedded", "vv", ""},
		{"forged", []string{chainPEM(sctworld.Forged)}, 1, "embedded,embedded", "vx", "Chrome"},
		{"unlisted log", []string{chainPEM(sctworld.Unlisted)}, 1, "embedded,embedded", "vu", "Chrome"},
		{"one SCT", []string{chainPEM(sctworld.OneSCT)}, 1, "embedded", "v", "Chrome"},
		{"one SCT, policy one", []string{chainPEM(sctworld.OneSCT), "--policy", "one"}, 0, "embedded", "v", ""},
		{"one SCT, Apple", []string{chainPEM(sctworld.OneSCT), "--policy", "apple"}, 1, "embedded", "v", "Apple"},
		{"issuer apart", []string{leafPEM(sctworld.Good), write("issuer.pem", w.CA.PEM())}, 0, "embedded,embedded", "vv", ""},
		{"TLS extension", []string{chainPEM(sctworld.TLS), "--sct-list", sctList}, 0, "tls,tls", "vv", ""},
		{"TLS certificate without its SCTs", []string{chainPEM(sctworld.TLS)}, 1, "", "", "Chrome"},
		{"OCSP", []string{chainPEM(sctworld.OCSP), "--ocsp", ocspResp}, 0, "ocsp,ocsp", "vv", ""},
		{"no SCT", []string{chainPEM(sctworld.NoSCT)}, 1, "", "", "Chrome"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, r, out, errs := run(append(tc.args, "--json")...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errs)
			}
			var sources []string
			valid := ""
			for _, s := range r.SCTs {
				sources = append(sources, s.Source)
				switch {
				case !s.Listed:
					valid += "u"
				case s.Valid:
					valid += "v"
				default:
					valid += "x"
				}
			}
			if strings.Join(sources, ",") != tc.sources || valid != tc.valid {
				t.Errorf("SCTs %v %q, want %s %q\n%s", sources, valid, tc.sources, tc.valid, out)
			}
			if r.Compliant != (tc.code == 0) || (tc.reason != "" && !strings.Contains(r.Policy+" "+r.Reason, tc.reason)) {
				t.Errorf("compliant %v, policy %q, reason %q; want reason naming %q", r.Compliant, r.Policy, r.Reason, tc.reason)
			}
			// The human form says the same.
			code2, _, text, _ := run(tc.args...)
			if code2 != code || !strings.Contains(text, "compliant: "+r.Policy) {
				t.Errorf("without --json: exit %d, output\n%s", code2, text)
			}
		})
	}

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"ct", "check", chainPEM(sctworld.Good)},                                                  // no --log-list
			{"ct", "check", "--log-list", w.ListPath},                                                 // no certificate
			{"ct", "check", "--log-list", w.ListPath, leafPEM(sctworld.Good)},                         // embedded, no issuer
			{"ct", "check", "--log-list", w.ListPath, "--policy", "firefox", chainPEM(sctworld.Good)}, // unknown policy
			{"ct", "check", "--log-list", filepath.Join(dir, "missing.json"), chainPEM(sctworld.Good)},
			{"ct", "check", "--log-list", w.ListPath, "--sct-list", ocspResp, chainPEM(sctworld.TLS)}, // not an SCT list
		} {
			if code, out, errs := runCLI(t, args...); code != 2 {
				t.Errorf("%v: exit %d, want 2\n%s\n%s", args, code, out, errs)
			}
		}
	})

	t.Run("inclusion", func(t *testing.T) {
		code, r, out, errs := run(chainPEM(sctworld.Good), "--inclusion", "--json")
		if code != 0 || !strings.Contains(errs, "learns which certificate") {
			t.Fatalf("exit %d\n%s\n%s", code, out, errs)
		}
		for i, s := range r.SCTs {
			if s.Inclusion == nil || s.Inclusion.Status != "included" || s.Inclusion.TreeSize == 0 {
				t.Errorf("SCT %d: inclusion %+v, want included in a checkpoint", i+1, s.Inclusion)
			}
		}
	})

	t.Run("witnesses", func(t *testing.T) {
		// The world's logs serve no cosignatures: a required witness
		// leaves inclusion unknown, naming the quorum, and the exit status
		// is the policy's.
		_, witness, err := checkpoint.GenerateKey("witness.test")
		if err != nil {
			t.Fatal(err)
		}
		code, r, out, errs := run(chainPEM(sctworld.Good), "--inclusion", "--witness", witness, "--json")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errs)
		}
		for i, s := range r.SCTs {
			if s.Inclusion == nil || s.Inclusion.Status != "unknown" || !strings.Contains(s.Inclusion.Detail, "witness") {
				t.Errorf("SCT %d: inclusion %+v, want unknown for want of the witness", i+1, s.Inclusion)
			}
		}
		for _, args := range [][]string{
			{chainPEM(sctworld.Good), "--witness", witness},                                         // without --inclusion
			{chainPEM(sctworld.Good), "--inclusion", "--witness", witness, "--witness-quorum", "2"}, // quorum above the witnesses
			{chainPEM(sctworld.Good), "--inclusion", "--witness", "not a key"},                      // not a key
		} {
			if code, _, out, errs := run(args...); code != 2 || !strings.Contains(errs, "witness") {
				t.Errorf("%v: exit %d, want 2 naming the witness flag\n%s\n%s", args, code, out, errs)
			}
		}
	})

	t.Run("log down", func(t *testing.T) {
		w.Logs[0].Stop()
		code, r, out, errs := run(chainPEM(sctworld.Spare), "--inclusion", "--json")
		if code != 0 {
			t.Fatalf("exit %d, want 0: a log that cannot be asked is no evidence against the certificate\n%s\n%s", code, out, errs)
		}
		if len(r.SCTs) != 2 || r.SCTs[0].Inclusion == nil || r.SCTs[0].Inclusion.Status != "unknown" ||
			!strings.Contains(r.SCTs[0].Inclusion.Detail, w.Logs[0].Description) {
			t.Fatalf("with %s down: %s", w.Logs[0].Description, out)
		}
		if s := r.SCTs[1].Inclusion; s == nil || s.Status != "included" {
			t.Errorf("the other log's SCT: %+v, want included", s)
		}
	})
}

// TestCTFlagsUsage: the ct verifier's flags of pkie check --cloud and
// pkie pec get refuse what does not go together, before the cloud is
// reached.
func TestCTFlagsUsage(t *testing.T) {
	bundle, reached := countingCloud(t)
	_, mirrorKey, err := checkpoint.GenerateKey("mirror.test")
	if err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(t.TempDir(), "log_list.json")
	os.WriteFile(list, []byte(`{"operators": []}`), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"policy without a list", []string{"--ct-policy", "apple"}, "need --ct-log-list"},
		{"fetch without a list", []string{"--ct-fetch"}, "need --ct-log-list"},
		{"unknown policy", []string{"--ct-log-list", list, "--ct-policy", "firefox"}, `--ct-policy "firefox"`},
		{"unknown inclusion", []string{"--ct-log-list", list, "--ct-inclusion", "maybe"}, `--ct-inclusion "maybe"`},
		{"signature without key", []string{"--ct-log-list", list, "--ct-log-list-sig", list}, "go together"},
		{"mirror key without log key", []string{"--ct-log-list", list, "--ct-key", mirrorKey}, "--ct-key needs --ct-log-key"},
		{"witness without a list", []string{"--ct-witness", mirrorKey}, "need --ct-log-list"},
		{"max list age without a list", []string{"--ct-max-list-age", "1680h"}, "need --ct-log-list"},
		{"quorum without witnesses", []string{"--ct-log-list", list, "--ct-witness-quorum", "1"}, "--ct-witness-quorum 1: want 1 to the number of --ct-witness keys (0)"},
		{"quorum above the witnesses", []string{"--ct-log-list", list, "--ct-witness", mirrorKey, "--ct-witness-quorum", "2"}, "--ct-witness-quorum 2"},
		{"a witness key that is not one", []string{"--ct-log-list", list, "--ct-witness", "not-a-key"}, "witness"},
	}
	for _, tc := range tests {
		for _, cmd := range [][]string{
			{"check", "site.test", "--cloud", bundle, "--require", "ct"},
			{"pec", "get", "--cloud", bundle, "https://site.test/"},
		} {
			code, out, errs := runCLI(t, append(cmd, tc.args...)...)
			if code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("%s: pkie %s: exit %d, stderr %q; want 2 and %q\n%s", tc.name, cmd[0], code, errs, tc.want, out)
			}
		}
	}
	if n := reached(); n != 0 {
		t.Errorf("the cloud was reached %d times by commands refused for their flags", n)
	}
}

// TestCTCheckInclusionStates drives the inclusion half of pkie ct check
// (ct.CheckSCTs) through the states a log's answer can give: included; a
// promise, when the log's newest checkpoint the fetcher holds predates the
// SCT and the log's merge delay still runs; unknown once that delay has
// passed without a newer checkpoint to show either way. The fetcher keeps
// a log's checkpoint for an hour, so the certificate logged after it was
// read is not in it.
func TestCTCheckInclusionStates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := sctworld.New(ctx, sctworld.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	list, err := loglist.Parse(w.List)
	if err != nil {
		t.Fatal(err)
	}
	f := &ctinclusion.Fetcher{Refresh: time.Hour, MinRefresh: time.Hour}
	check := func(site string, now time.Time) *ct.Report {
		s := w.Site(site)
		issuer, err := x509.ParseCertificate(s.Leaf.Chain[1])
		if err != nil {
			t.Fatal(err)
		}
		return ct.CheckSCTs(ctx, ct.CheckInput{Leaf: s.Leaf.Cert, Issuer: issuer, List: list, Policy: sctpolicy.Chrome(), Inclusion: f, Now: now})
	}
	states := func(r *ct.Report) string {
		var out []string
		for _, s := range r.SCTs {
			if s.Inclusion == nil {
				out = append(out, "none")
				continue
			}
			out = append(out, s.Inclusion.Status)
		}
		return strings.Join(out, ",")
	}
	if r := check(sctworld.Good, time.Now()); states(r) != "included,included" || !r.Compliant {
		t.Fatalf("good: %s, compliant %v: %+v", states(r), r.Compliant, r.SCTs)
	}
	late, err := w.Issue(ctx, "late.sct.test", w.Logs[0], w.Logs[1])
	if err != nil {
		t.Fatal(err)
	}
	if r := check(late.Name, time.Now()); states(r) != "promise,promise" || !r.Compliant || r.Contradicted ||
		!strings.Contains(r.SCTs[0].Inclusion.Detail, "promise") {
		t.Errorf("logged after the checkpoint was read: %s, compliant %v, contradicted %v: %+v", states(r), r.Compliant, r.Contradicted, r.SCTs)
	}
	past := time.Now().Add(w.Logs[0].MMD + time.Hour)
	if r := check(late.Name, past); states(r) != "unknown,unknown" || r.Contradicted {
		t.Errorf("past the merge delay with no newer checkpoint: %s, contradicted %v: %+v", states(r), r.Contradicted, r.SCTs)
	}
}

// TestPECProxySCTListUsage: pkie pec-proxy refuses an --sct-list that is
// not a SignedCertificateTimestampList, before it listens.
func TestPECProxySCTListUsage(t *testing.T) {
	dir := t.TempDir()
	root, err := testbed.NewRootCA("pec-proxy sct root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := root.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, bad := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "scts")
	writePEM(t, cert, "CERTIFICATE", leaf.Chain[0])
	writePEM(t, key, "PRIVATE KEY", keyDER)
	os.WriteFile(bad, []byte{0, 9, 0, 7, 1, 2, 3}, 0o644)
	for _, f := range []string{bad, filepath.Join(dir, "missing")} {
		code, out, errs := runCLI(t, "pec-proxy", "--listen", "127.0.0.1:0", "--cert", cert, "--key", key, "--backend", "http://127.0.0.1:1",
			"--cloud-allow", "127.0.0.1:1", "--sct-list", f)
		if code != 2 || !strings.Contains(errs, "--sct-list") {
			t.Errorf("--sct-list %s: exit %d, stderr %q; want 2 naming --sct-list\n%s", filepath.Base(f), code, errs, out)
		}
	}
}
