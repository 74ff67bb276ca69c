package verifybench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestServoTable: the experiment's table names every one of Sites, once
// per method, spelt as Sites spells them.
func TestServoTable(t *testing.T) {
	seen := map[string]int{}
	for _, s := range servoTable() {
		if _, ok := LookupSite(s.Site); !ok {
			t.Errorf("row for unknown site %q", s.Site)
		}
		seen[s.Site+"/"+s.Method]++
	}
	for _, site := range SiteNames() {
		for _, m := range []string{"openssl", "rustls serial", "rustls parallel"} {
			if seen[site+"/"+m] != 1 {
				t.Errorf("%s %s: %d rows, want 1", site, m, seen[site+"/"+m])
			}
		}
	}
}

// TestServoBeside puts the experiment's figures beside a made-up report's
// sites, in the text and in the JSON, including one saved without them.
func TestServoBeside(t *testing.T) {
	ms := time.Millisecond
	method := func(name string) Method {
		return Method{Backend: name, Code: "ok", Valid: true, Phases: Phases{Roots: Summary{N: 1, Mean: ms}, Verify: Summary{N: 1, Mean: ms},
			Total: Summary{N: 1, Mean: 2 * ms}}, Connect: &Summary{N: 1, P50: 40 * ms}}
	}
	r := &Report{Backends: []BackendInfo{{Name: "go"}, {Name: "go-parallel"}, {Name: "openssl"}, {Name: "webpki"}}}
	for _, site := range []string{"arstechnica", "hackernews"} {
		r.Sites = append(r.Sites, SiteResult{Site: site, Connect: Summary{N: 1, P50: 38 * ms},
			Methods: []Method{method("go"), method("go-parallel"), method("openssl"), method("webpki")}})
	}
	r.compare()
	// Saved as a run before this change would have saved it: no figures.
	old, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(old, []byte(`"paper"`)) || bytes.Contains(old, []byte("servo_fastest")) {
		t.Fatalf("figures before addPaper: %s", old)
	}
	var loaded Report
	if err := json.Unmarshal(old, &loaded); err != nil {
		t.Fatal(err)
	}
	r.addPaper()
	for name, rep := range map[string]*Report{"run": r, "loaded": &loaded} {
		got := map[string]*Servo{}
		for _, s := range rep.Sites {
			for _, m := range s.Methods {
				got[s.Site+"/"+m.Backend] = m.Paper
			}
		}
		for key, want := range map[string]Servo{
			"arstechnica/openssl":     {Method: "openssl", RootsMS: 6.5937645, VerifyCallMS: 0.04212679, VerificationMS: 0.11863110, ConnectionMS: 7.63642713},
			"arstechnica/webpki":      {Method: "rustls serial", RootsMS: 1.7092342, VerifyCallMS: 0.8465297, VerificationMS: 0.8523814, ConnectionMS: 17.3814024},
			"arstechnica/go-parallel": {Method: "rustls parallel", RootsMS: 0.6452306, VerifyCallMS: 0.9613585, VerificationMS: 0.9679321, ConnectionMS: 10.6051663},
			"hackernews/webpki":       {Method: "rustls serial", RootsMS: 2.3374316},
		} {
			p := got[key]
			if p == nil || p.Method != want.Method || p.RootsMS != want.RootsMS || p.VerifyCallMS != want.VerifyCallMS ||
				p.VerificationMS != want.VerificationMS || p.ConnectionMS != want.ConnectionMS {
				t.Errorf("%s: %s: %+v, want %+v", name, key, p, want)
			}
		}
		if got["arstechnica/go"] != nil {
			t.Errorf("%s: go has no counterpart, got %+v", name, got["arstechnica/go"])
		}
		if rep.Comparison.ServoFastest["total"]["openssl"] != 11 || rep.Comparison.ServoFastest["connect"]["rustls serial"] != 4 {
			t.Errorf("%s: servo fastest %v", name, rep.Comparison.ServoFastest)
		}
	}
	var text bytes.Buffer
	r.WriteText(&text)
	lines := strings.Split(text.String(), "\n")
	for _, want := range []struct{ site, backend, cell string }{
		{"arstechnica", "openssl", "openssl: 6.59 / 0.0421 / 0.119 / 7.64"},
		{"arstechnica", "webpki", "rustls serial: 1.71 / 0.847 / 0.852 / 17.4"},
		{"arstechnica", "go-parallel", "rustls parallel: 0.645 / 0.961 / 0.968 / 10.6"},
		{"hackernews", "webpki", "rustls serial: 2.34 / – / – / –"},
	} {
		found := false
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 1 && f[0] == want.site && f[1] == want.backend {
				found = true
				if !strings.Contains(l, want.cell) {
					t.Errorf("%s %s: %q lacks %q", want.site, want.backend, l, want.cell)
				}
			}
		}
		if !found {
			t.Errorf("no line for %s %s in\n%s", want.site, want.backend, text.String())
		}
	}
	if !strings.Contains(text.String(), "Servo experiment, of 12 sites: fastest total verification openssl 11") {
		t.Errorf("no experiment summary in\n%s", text.String())
	}
}
