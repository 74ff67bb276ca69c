package roots

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pkie/pkie/internal/scan"
	"github.com/pkie/pkie/internal/testbed"
)

// fakeData builds loaded data directly: nroots roots and one valid site
// per entry of anchors (each a list of root indices).
func fakeData(t *testing.T, nroots int, anchors [][]int32) *Data {
	t.Helper()
	var pemBuf bytes.Buffer
	for i := range nroots {
		ca, err := testbed.NewRootCA(fmt.Sprintf("Root %c", 'A'+i), testbed.ECDSAP256)
		if err != nil {
			t.Fatal(err)
		}
		pemBuf.Write(ca.PEM())
	}
	store, err := ParsePEM("fake", pemBuf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	d := &Data{Store: store, v: newVerifier(store), Vantages: []string{""}}
	for _, c := range store.Certs {
		d.v.root(c)
	}
	for i, a := range anchors {
		set := d.v.anchorSet(append([]int32(nil), a...))
		d.sites = append(d.sites, site{key: fmt.Sprintf("\x00\x00s%d.test", i), rank: int32(i + 1), o: outcome{status: StatusValid, anchors: set}})
	}
	return d
}

func TestMinimalSetBeatsGreedy(t *testing.T) {
	// The textbook case where greedy is not optimal: S covers four sites,
	// T1 and T2 three each, and T1+T2 cover all six while greedy takes S
	// first and then needs both T1 and T2.
	const S, T1, T2 = 0, 1, 2
	d := fakeData(t, 3, [][]int32{{S, T1}, {S, T1}, {T1}, {S, T2}, {S, T2}, {T2}})
	v := d.view(d.mainSites(), 1.0)
	m := v.Minimal
	if !m.Reachable || !m.Optimal || len(m.Roots) != 2 || m.Covered != 6 || m.LowerBound != 2 {
		t.Fatalf("minimal %+v", m)
	}
	for _, rc := range m.Roots {
		if rc.id == S {
			t.Errorf("optimal set contains S: %+v", m.Roots)
		}
	}
	if m.Method == "greedy size equals the lower bound" {
		t.Errorf("method %q: greedy alone cannot find this", m.Method)
	}
	// Trusting the top 2 by popularity (S and one T) leaves one site out.
	if v.Coverage[1].Sites != 5 || v.Coverage[2].Sites != 6 || m.TopK != 3 {
		t.Errorf("coverage %+v, top_k %d", v.Coverage, m.TopK)
	}
}

func TestMinimalSetCases(t *testing.T) {
	tests := []struct {
		name    string
		nroots  int
		anchors [][]int32
		target  float64
		size    int
		covered int
	}{
		{"one root", 1, [][]int32{{0}, {0}}, 0.8, 1, 2},
		{"target rounds up", 3, [][]int32{{0}, {0}, {1}, {2}, {2}}, 0.6, 2, 4},
		{"cross-signed site counts once", 2, [][]int32{{0, 1}, {0, 1}, {1}}, 1, 1, 3},
		{"zero target", 2, [][]int32{{0}}, 0.0001, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := fakeData(t, tt.nroots, tt.anchors)
			m := d.view(d.mainSites(), tt.target).Minimal
			if len(m.Roots) != tt.size || m.Covered != tt.covered || !m.Optimal {
				t.Errorf("minimal %+v, want %d roots covering %d", m, tt.size, tt.covered)
			}
		})
	}
}

func TestRankingCountsCrossSignedUnderBoth(t *testing.T) {
	d := fakeData(t, 2, [][]int32{{0, 1}, {0}, {1}, {1}})
	v := d.view(d.mainSites(), 0.5)
	if v.Ranking[0].Sites != 3 || v.Ranking[1].Sites != 2 || v.SitesValid != 4 {
		t.Errorf("ranking %+v", v.Ranking)
	}
	if len(v.Organisations) != 2 {
		t.Errorf("organisations %+v", v.Organisations)
	}
	if v.Coverage[0].Sites != 3 || v.Coverage[1].Sites != 4 {
		t.Errorf("coverage %+v", v.Coverage)
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"rank":1,"domain":"a.com","ip":"127.0.0.1","port":443,"time":"2026-01-02T03:04:05.123Z","vantage":"v","chain":["AQID","BAUG"],"error":"","attempts":1}`))
	f.Add([]byte(`{"rank":2,"domain":"b.com","chain":[],"error":"timeout: x"}`))
	f.Add([]byte(` { "rank" : 3 , "domain" : "c.com" , "chain" : null , "error" : "e" } `))
	f.Add([]byte(`{"rank":1,"rank":null,"domain":"a\u0062.com","chain":["AQID"],"error":""}`))
	f.Add([]byte(`{"Rank":1,"domain":"a.com","chain":["AQID"]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		fast, ok := parseFast(line)
		if !ok || fast.check() != nil {
			return
		}
		// Whatever the fast path accepts, encoding/json must read the same,
		// or reject it only for bad base64, which the loader rejects too.
		rec, err := scan.ParseRecord(line)
		bad64 := false
		for _, c := range fast.chain {
			if _, derr := base64.StdEncoding.DecodeString(string(c)); derr != nil {
				bad64 = true
			}
		}
		if err != nil {
			if !bad64 {
				t.Fatalf("fast path accepted %q, encoding/json says %v", line, err)
			}
			return
		}
		if bad64 {
			t.Fatalf("encoding/json accepted bad base64 in %q", line)
		}
		if rec.Rank != fast.rank || rec.Domain != string(fast.domain) || rec.Vantage != string(fast.vantage) ||
			rec.Error != string(fast.errMsg) || !rec.Time.Equal(fast.time) || len(rec.Chain) != len(fast.chain) {
			t.Fatalf("fast %+v, json %+v for %q", fast, rec, line)
		}
		for i, c := range rec.Chain {
			if der, _ := base64.StdEncoding.DecodeString(string(fast.chain[i])); !bytes.Equal(der, c) {
				t.Fatalf("chain[%d] differs for %q", i, line)
			}
		}
	})
}

// FuzzLoad feeds arbitrary bytes to the whole loader and analysis: no
// panic, and every line is counted once as a record, malformed or a
// truncated tail.
func FuzzLoad(f *testing.F) {
	ca, err := testbed.NewRootCA("Fuzz Root", testbed.ECDSAP256)
	if err != nil {
		f.Fatal(err)
	}
	leaf, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"a.test"}})
	store, _ := ParsePEM("fuzz", ca.PEM())
	good, _ := json.Marshal(scan.Record{Rank: 1, Domain: "a.test", Chain: leaf.Chain})
	f.Add(append(good, '\n'))
	f.Add([]byte(`{"rank":2,"domain":"b.test","chain":[],"error":"timeout: x"}` + "\n" + `{"rank":3,"dom`))
	f.Add([]byte(`{"rank":1,"domain":"c.test","chain":["AAAA"],"error":""}` + "\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Load(context.Background(), []Input{{Name: "f", R: bytes.NewReader(in)}}, LoadOptions{Store: store, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		st := d.Stats
		if st.Records+st.Malformed+len(st.Truncated) > bytes.Count(in, []byte("\n"))+1 {
			t.Fatalf("more outcomes than lines: %+v", st)
		}
		rep := d.Analyze(0.8)
		if rep.SitesValid > rep.SitesAnswered || rep.SitesAnswered > rep.SitesTotal {
			t.Fatalf("valid %d > answered %d > total %d", rep.SitesValid, rep.SitesAnswered, rep.SitesTotal)
		}
	})
}
