package scan

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

func readAll(t *testing.T, r io.Reader, limit int) ([]Site, []*LineError) {
	t.Helper()
	l := NewListReader(r)
	l.Limit = limit
	var bad []*LineError
	l.OnMalformed = func(e *LineError) { bad = append(bad, e) }
	var sites []Site
	for {
		s, err := l.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sites = append(sites, s)
	}
	if l.Malformed() != len(bad) {
		t.Errorf("Malformed() = %d, reported %d", l.Malformed(), len(bad))
	}
	return sites, bad
}

func TestListReaderMixedFile(t *testing.T) {
	f, err := os.Open("testdata/mixed.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sites, bad := readAll(t, f, 0)
	want := []Site{{1, "example.com"}, {3, "example.org"}, {4, "plain.net"}, {10, "spaced.io"}}
	if len(sites) != len(want) {
		t.Fatalf("sites = %v, want %v", sites, want)
	}
	for i := range want {
		if sites[i] != want[i] {
			t.Errorf("site %d = %v, want %v", i, sites[i], want[i])
		}
	}
	wantBad := map[int]string{5: "not allowed", 7: "rank", 8: "more than two", 10: "not a bare domain"}
	if len(bad) != len(wantBad) {
		t.Fatalf("malformed lines = %v, want lines %v", bad, wantBad)
	}
	for _, e := range bad {
		frag, ok := wantBad[e.Line]
		if !ok || !strings.Contains(e.Reason, frag) {
			t.Errorf("unexpected report %v (want line %d to say %q)", e, e.Line, frag)
		}
		if !strings.Contains(e.Error(), "line ") {
			t.Errorf("error %q does not name its line", e.Error())
		}
	}
}

func TestListReaderCases(t *testing.T) {
	long := strings.Repeat("a", maxListLine+10) + ".com"
	tests := []struct {
		name    string
		in      string
		limit   int
		want    []Site
		badLine []int
	}{
		{"plain list ranks by position", "a.com\nb.com\n", 0, []Site{{1, "a.com"}, {2, "b.com"}}, nil},
		{"csv", "5,a.com\n9,b.com", 0, []Site{{5, "a.com"}, {9, "b.com"}}, nil},
		{"limit", "a.com\nb.com\nc.com\n", 2, []Site{{1, "a.com"}, {2, "b.com"}}, nil},
		{"limit counts only good lines", "x y\na.com\nb.com\n", 1, []Site{{1, "a.com"}}, []int{1}},
		{"ip literal", "1,127.0.0.1\n", 0, []Site{{1, "127.0.0.1"}}, nil},
		{"zero rank", "0,a.com\n", 0, nil, []int{1}},
		{"empty domain", "1,\n", 0, nil, []int{1}},
		{"empty label", "1,a..com\n", 0, nil, []int{1}},
		{"long label", "1," + strings.Repeat("a", 64) + ".com\n", 0, nil, []int{1}},
		{"too long line skipped", long + "\nok.com\n", 0, []Site{{1, "ok.com"}}, []int{1}},
		{"port is not a domain", "a.com:443\n", 0, nil, []int{1}},
		{"header only when first", "1,a.com\nrank,domain\n", 0, []Site{{1, "a.com"}}, []int{2}},
		{"empty input", "", 0, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sites, bad := readAll(t, strings.NewReader(tt.in), tt.limit)
			if len(sites) != len(tt.want) {
				t.Fatalf("sites = %v, want %v", sites, tt.want)
			}
			for i := range sites {
				if sites[i] != tt.want[i] {
					t.Errorf("site %d = %v, want %v", i, sites[i], tt.want[i])
				}
			}
			if len(bad) != len(tt.badLine) {
				t.Fatalf("malformed = %v, want lines %v", bad, tt.badLine)
			}
			for i, e := range bad {
				if e.Line != tt.badLine[i] {
					t.Errorf("malformed line %d reported as line %d", tt.badLine[i], e.Line)
				}
			}
		})
	}
}

func TestCountSites(t *testing.T) {
	n, err := CountSites(strings.NewReader("a.com\nbad domain\nb.com\nc.com\n"), 0)
	if err != nil || n != 3 {
		t.Errorf("CountSites = %d, %v; want 3", n, err)
	}
	n, _ = CountSites(strings.NewReader("a.com\nb.com\nc.com\n"), 2)
	if n != 2 {
		t.Errorf("CountSites with limit 2 = %d", n)
	}
}

func FuzzListReader(f *testing.F) {
	b, _ := os.ReadFile("testdata/mixed.csv")
	f.Add(b)
	f.Add([]byte("1,a.com\nb.org\n"))
	f.Add([]byte("\xef\xbb\xbf,\n,,\n#\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		l := NewListReader(strings.NewReader(string(in)))
		lines := strings.Count(string(in), "\n") + 1
		l.OnMalformed = func(e *LineError) {
			if e.Line < 1 || e.Line > lines {
				t.Fatalf("malformed line number %d out of 1..%d", e.Line, lines)
			}
		}
		for {
			s, err := l.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				return
			}
			if s.Rank < 1 {
				t.Fatalf("site %v has rank < 1", s)
			}
			if d, err := NormalizeDomain(s.Domain); err != nil || d != s.Domain {
				t.Fatalf("site domain %q is not normalized (%q, %v)", s.Domain, d, err)
			}
		}
	})
}
