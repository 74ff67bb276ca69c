package cli

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/cli/client"
	"github.com/pkie/pkie/internal/cli/measure"
	"github.com/pkie/pkie/internal/scan"
	"github.com/pkie/pkie/internal/testbed"
)

func TestScanAndRootsCommands(t *testing.T) {
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: 80, Listeners: 2, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dir := t.TempDir()
	list := filepath.Join(dir, "sites.csv")
	// Two malformed lines (3 and 5) among the synthetic web's.
	lines := strings.SplitAfter(string(w.SiteList()), "\n")
	content := lines[0] + lines[1] + "not a domain\n" + lines[2] + "x,y.com\n" + strings.Join(lines[3:], "")
	os.WriteFile(list, []byte(content), 0o644)
	resolve := filepath.Join(dir, "resolve.txt")
	os.WriteFile(resolve, w.ResolveFile(), 0o644)
	rootsPEM := filepath.Join(dir, "roots.pem")
	os.WriteFile(rootsPEM, w.RootsPEM(), 0o644)
	out := filepath.Join(dir, "scan.jsonl")

	code, stdout, stderr := runCLI(t, "scan", list, "--out", out, "--allow-private", "--resolve-file", resolve,
		"--vantage", "lab", "--limit", "30", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("scan exit %d: %s", code, stderr)
	}
	var sum measure.ScanSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("scan --json: %v in %q", err, stdout)
	}
	if sum.Scanned != 30 || sum.OK != 30 || sum.ListMalformed != 2 {
		t.Errorf("first scan summary %+v", sum)
	}
	if !strings.Contains(stderr, "sites.csv:line 3:") || !strings.Contains(stderr, "sites.csv:line 5:") {
		t.Errorf("malformed lines not reported with numbers: %q", stderr)
	}
	// Resume: the rest of the list, skipping the 30 recorded.
	code, stdout, stderr = runCLI(t, "scan", list, "--out", out, "--allow-private", "--resolve-file", resolve,
		"--vantage", "lab", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("resumed scan exit %d: %s", code, stderr)
	}
	sum = measure.ScanSummary{}
	json.Unmarshal([]byte(stdout), &sum)
	if sum.Skipped != 30 || sum.Scanned != len(w.Sites)-30 || sum.Resumed != 30 {
		t.Errorf("resumed summary %+v", sum)
	}

	export := filepath.Join(dir, "min.pem")
	plot := filepath.Join(dir, "cov")
	code, stdout, stderr = runCLI(t, "roots", out, "--roots", rootsPEM, "--json", "--export", export, "--plot", plot, "--quiet")
	if code != 0 {
		t.Fatalf("roots exit %d: %s", code, stderr)
	}
	var rep struct {
		SitesTotal int `json:"sites_total"`
		SitesValid int `json:"sites_valid"`
		Ranking    []struct {
			Subject string `json:"subject"`
			SHA256  string `json:"sha256"`
			Sites   int    `json:"sites"`
		} `json:"ranking"`
		Coverage []struct {
			K     int     `json:"k"`
			Share float64 `json:"share"`
		} `json:"coverage"`
		Minimal struct {
			Covered int `json:"sites_covered"`
		} `json:"minimal"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("roots --json: %v", err)
	}
	if rep.SitesTotal != len(w.Sites) || rep.SitesValid != w.ValidSites() {
		t.Errorf("sites_total %d sites_valid %d, want %d and %d", rep.SitesTotal, rep.SitesValid, len(w.Sites), w.ValidSites())
	}
	counts := w.RootSiteCounts()
	for i, r := range rep.Ranking {
		if i > 0 && r.Sites > rep.Ranking[i-1].Sites {
			t.Errorf("ranking not sorted by sites: %+v", rep.Ranking)
		}
		found := false
		for j, c := range w.Roots {
			if hexDER(c.Cert) == r.SHA256 {
				found = true
				if counts[j] != r.Sites {
					t.Errorf("%s: %d sites, truth %d", r.Subject, r.Sites, counts[j])
				}
			}
		}
		if !found {
			t.Errorf("ranked root %s is not a synthetic root", r.Subject)
		}
	}
	if n := len(rep.Coverage); n == 0 || rep.Coverage[n-1].Share != 1 || rep.Coverage[0].K != 1 {
		t.Errorf("coverage %+v", rep.Coverage)
	}
	for _, f := range []string{plot + "-coverage.svg", plot + "-coverage.png"} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
	// The export is a trust store for pkie check --roots.
	pool, err := client.LoadRoots(export)
	if err != nil {
		t.Fatal(err)
	}
	// Verified the way pkie check does (crypto/x509 with that pool), the
	// recorded chains validate exactly for the sites the set covers.
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	verified := 0
	scan.ReadRecords(f, func(r scan.Record) error {
		leaf, err := x509.ParseCertificate(r.Chain[0])
		if err != nil {
			return nil
		}
		inter := x509.NewCertPool()
		for _, der := range r.Chain[1:] {
			if c, err := x509.ParseCertificate(der); err == nil {
				inter.AddCert(c)
			}
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: r.Domain}); err == nil {
			verified++
		}
		return nil
	})
	if verified != rep.Minimal.Covered {
		t.Errorf("crypto/x509 with the exported pool verifies %d sites, minimal set covers %d", verified, rep.Minimal.Covered)
	}
	code, stdout, stderr = runCLI(t, "roots", out, "--roots", export, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("roots with exported store: exit %d: %s", code, stderr)
	}
	var again struct {
		SitesValid int `json:"sites_valid"`
	}
	json.Unmarshal([]byte(stdout), &again)
	if again.SitesValid != rep.Minimal.Covered || again.SitesValid == 0 {
		t.Errorf("exported store validates %d sites, minimal set covers %d", again.SitesValid, rep.Minimal.Covered)
	}

	// The human tables.
	code, stdout, _ = runCLI(t, "roots", out, "--roots", rootsPEM, "--quiet")
	for _, want := range []string{"Table 3", "Table 5", "Figure 17", "Smallest root set", "Synth Alpha Root CA 0"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("roots output lacks %q:\n%s", want, stdout)
		}
	}
}

func hexDER(c *x509.Certificate) string {
	s := sha256.Sum256(c.Raw)
	return hex.EncodeToString(s[:])
}

func TestScanAndRootsCommandErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"scan"}, "exactly one site list"},
		{[]string{"scan", filepath.Join(dir, "nope.csv")}, "site list"},
		{[]string{"scan", "x", "--concurrency", "0"}, "--concurrency"},
		{[]string{"scan", "x", "--resolve", "bad"}, "--resolve"},
		{[]string{"roots"}, "at least one scan file"},
		{[]string{"roots", "x", "--coverage", "2"}, "--coverage"},
		{[]string{"roots", "x", "--roots", filepath.Join(dir, "none.pem")}, "--roots"},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI(t, tt.args...)
		if code != ExitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

// TestScanKilledResumes kills a scanning pkie process with SIGKILL and
// resumes the scan from its file: every site ends up recorded exactly once.
func TestScanKilledResumes(t *testing.T) {
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: 80, Listeners: 1, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dir := t.TempDir()
	list, resolve, out := filepath.Join(dir, "sites.csv"), filepath.Join(dir, "resolve.txt"), filepath.Join(dir, "scan.jsonl")
	os.WriteFile(list, w.SiteList(), 0o644)
	os.WriteFile(resolve, w.ResolveFile(), 0o644)
	c := startChild(t, "scan", list, "--out", out, "--allow-private", "--resolve-file", resolve, "--rate", "40", "--quiet")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := os.Stat(out); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scanner wrote nothing in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()

	code, stdout, stderr := runCLI(t, "scan", list, "--out", out, "--allow-private", "--resolve-file", resolve, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("resume exit %d: %s", code, stderr)
	}
	var sum measure.ScanSummary
	json.Unmarshal([]byte(stdout), &sum)
	if sum.Skipped == 0 || sum.Skipped+sum.Scanned != len(w.Sites) {
		t.Errorf("resume summary %+v", sum)
	}
	f, _ := os.Open(out)
	defer f.Close()
	seen := map[string]bool{}
	st, err := scan.ReadRecords(f, func(r scan.Record) error {
		if seen[r.Domain] {
			t.Errorf("%s recorded twice", r.Domain)
		}
		seen[r.Domain] = true
		return nil
	})
	if err != nil || st.Malformed != 0 || st.Truncated || len(seen) != len(w.Sites) {
		t.Errorf("after resume: %d sites, stats %+v, %v", len(seen), st, err)
	}
}
