package scan

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

func startWeb(t *testing.T, sites int) *testbed.SynthWeb {
	t.Helper()
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: sites, Listeners: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func scanOpts(w *testbed.SynthWeb) Options {
	return Options{
		Probe:       probe.Options{Lookup: w.Resolver.Lookup, AllowPrivate: true, Vantage: "here", Timeout: 5 * time.Second},
		Concurrency: 8,
		Backoff:     time.Millisecond,
	}
}

func loadFile(t *testing.T, path string) (map[string]Record, LoadStats) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]Record{}
	st, err := ReadRecords(f, func(r Record) error {
		if _, dup := got[r.Domain]; dup {
			t.Errorf("%s recorded twice", r.Domain)
		}
		got[r.Domain] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, st
}

func TestScanRecordsEverySite(t *testing.T) {
	w := startWeb(t, 60)
	list := append(w.SiteList(), []byte("9999,missing.test\n")...)
	var out, prog bytes.Buffer
	o := scanOpts(w)
	o.Progress = &prog
	o.Total = len(w.Sites) + 1
	sum, err := Run(context.Background(), NewListReader(bytes.NewReader(list)), &out, o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Scanned != len(w.Sites)+1 || sum.OK != len(w.Sites) || sum.Failed != 1 || sum.Errors["resolve"] != 1 {
		t.Errorf("summary = %+v", sum)
	}
	if sum.Attempts != len(w.Sites)+2 { // the missing site is retried once
		t.Errorf("attempts = %d, want %d", sum.Attempts, len(w.Sites)+2)
	}
	if !strings.Contains(prog.String(), "done in") {
		t.Errorf("no final progress line in %q", prog.String())
	}
	path := filepath.Join(t.TempDir(), "scan.jsonl")
	os.WriteFile(path, out.Bytes(), 0o644)
	got, st := loadFile(t, path)
	if st.Malformed != 0 || st.Truncated {
		t.Errorf("stats = %+v", st)
	}
	for _, s := range w.Sites {
		r, ok := got[s.Domain]
		if !ok {
			t.Errorf("%s not recorded", s.Domain)
			continue
		}
		// The record names the address and port actually dialled: the
		// resolver sends port 443 to the site's listener.
		addrs, _ := w.Resolver.Lookup(context.Background(), s.Domain, 443)
		if len(addrs) == 0 || !r.OK() || r.Rank != s.Rank || r.Vantage != "here" || r.Port != int(addrs[0].Port()) || r.IP != "127.0.0.1" || r.Time.IsZero() {
			t.Errorf("record %+v, want port %v", r, addrs)
			continue
		}
		leaf, err := x509.ParseCertificate(r.Chain[0])
		if err != nil || leaf.VerifyHostname(s.Domain) != nil {
			t.Errorf("%s: recorded leaf is not the site's (%v)", s.Domain, err)
		}
		wantLen := map[testbed.SiteKind]int{testbed.KindLeafOnly: 1, testbed.KindSendRoot: 3, testbed.KindCrossSigned: 3}[s.Kind]
		if wantLen == 0 {
			wantLen = 2
		}
		if len(r.Chain) != wantLen {
			t.Errorf("%s (%s): chain of %d, want %d", s.Domain, s.Kind, len(r.Chain), wantLen)
		}
	}
	if r := got["missing.test"]; r.OK() || !strings.HasPrefix(r.Error, "resolve: ") || r.Rank != 9999 {
		t.Errorf("missing site recorded as %+v", r)
	}
}

func TestScanResumeSkipsRecordedSites(t *testing.T) {
	w := startWeb(t, 50)
	path := filepath.Join(t.TempDir(), "scan.jsonl")
	run := func(limit int) Summary {
		f, done, _, err := OpenResume(path, false)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		l := NewListReader(bytes.NewReader(w.SiteList()))
		l.Limit = limit
		o := scanOpts(w)
		o.Skip = done.Has
		sum, err := Run(context.Background(), l, f, o)
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	if s := run(20); s.Scanned != 20 || s.Skipped != 0 {
		t.Fatalf("first run %+v", s)
	}
	if s := run(0); s.Scanned != len(w.Sites)-20 || s.Skipped != 20 {
		t.Fatalf("resumed run %+v", s)
	}
	if s := run(0); s.Scanned != 0 || s.Skipped != len(w.Sites) {
		t.Fatalf("third run %+v", s)
	}
	got, _ := loadFile(t, path)
	if len(got) != len(w.Sites) {
		t.Errorf("file holds %d sites, want %d", len(got), len(w.Sites))
	}
}

func TestScanTruncatedFileResumesAfterLastWholeRecord(t *testing.T) {
	w := startWeb(t, 40)
	var out bytes.Buffer
	l := NewListReader(bytes.NewReader(w.SiteList()))
	l.Limit = 10
	if _, err := Run(context.Background(), l, &out, scanOpts(w)); err != nil {
		t.Fatal(err)
	}
	full := out.Bytes()
	// Cut the file in the middle of its last record, as a killed scanner
	// would leave it.
	lastNL := bytes.LastIndexByte(full[:len(full)-1], '\n')
	cut := full[:lastNL+1+(len(full)-lastNL)/2]
	path := filepath.Join(t.TempDir(), "scan.jsonl")
	if err := os.WriteFile(path, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	got, st := loadFile(t, path)
	if len(got) != 9 || !st.Truncated || st.Malformed != 0 || !strings.Contains(st.Problems[0], "line 10") {
		t.Fatalf("truncated file loaded %d records, stats %+v", len(got), st)
	}
	f, done, st, err := OpenResume(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if done.Len() != 9 || !st.Truncated {
		t.Fatalf("resume found %d done, stats %+v", done.Len(), st)
	}
	o := scanOpts(w)
	o.Skip = done.Has
	sum, err := Run(context.Background(), NewListReader(bytes.NewReader(w.SiteList())), f, o)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped != 9 || sum.Scanned != len(w.Sites)-9 {
		t.Errorf("rescan %+v", sum)
	}
	got, st = loadFile(t, path)
	if len(got) != len(w.Sites) || st.Malformed != 0 || st.Truncated {
		t.Errorf("after rescan: %d sites, stats %+v", len(got), st)
	}
}

func TestOpenResumeRetryFailedAndMissingNewline(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scan.jsonl")
	content := `{"rank":1,"domain":"a.com","chain":["AQID"],"error":""}` + "\n" +
		"garbage\n" +
		`{"rank":2,"domain":"b.com","chain":[],"error":"timeout: slow"}` + "\n" +
		`{"rank":3,"domain":"c.com","chain":["AQID"],"error":""}` // whole, but no newline
	os.WriteFile(path, []byte(content), 0o644)
	f, done, st, err := OpenResume(path, true)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(`{"rank":4,"domain":"d.com","chain":["AQID"],"error":""}` + "\n"))
	f.Close()
	if !done.Has("a.com") || done.Has("b.com") || !done.Has("c.com") || st.Malformed != 1 || st.Truncated {
		t.Errorf("done a=%v b=%v c=%v, stats %+v", done.Has("a.com"), done.Has("b.com"), done.Has("c.com"), st)
	}
	got, st := loadFile(t, path)
	if len(got) != 4 || st.Malformed != 1 || !strings.Contains(st.Problems[0], "line 2") {
		t.Errorf("loaded %v, stats %+v", got, st)
	}
}

func TestScanCancelled(t *testing.T) {
	w := startWeb(t, 40)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	_, err := Run(ctx, NewListReader(bytes.NewReader(w.SiteList())), &out, scanOpts(w))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestScanRefusesLoopbackByDefault(t *testing.T) {
	w := startWeb(t, 40)
	o := scanOpts(w)
	o.Probe.AllowPrivate = false
	l := NewListReader(bytes.NewReader(w.SiteList()))
	l.Limit = 3
	var out bytes.Buffer
	sum, err := Run(context.Background(), l, &out, o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors["forbidden"] != 3 || sum.Attempts != 3 {
		t.Errorf("summary %+v: want 3 forbidden, not retried", sum)
	}
}

func TestLimiterSpacesAttempts(t *testing.T) {
	// Not a timing assertion on performance: the limiter's schedule itself.
	// Only lower bounds: a loaded machine can delay any wait, never
	// shorten one.
	l := newLimiter(1000)
	ctx := context.Background()
	start := time.Now()
	for range 3 {
		if err := l.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The third attempt's slot is two intervals after the first's.
	if elapsed := time.Since(start); elapsed < 2*time.Millisecond {
		t.Errorf("three attempts at 1000/s took %v; want at least 2 intervals", elapsed)
	}
	// Each attempt moved the schedule one interval on from the first slot,
	// which was no earlier than start.
	if ahead := l.next.Sub(start); ahead < 3*time.Millisecond {
		t.Errorf("next slot only %v after the first attempt; want at least 3 intervals", ahead)
	}
	if newLimiter(0) != nil {
		t.Error("rate 0 should mean no limiter")
	}
}

func FuzzReadRecords(f *testing.F) {
	f.Add([]byte(`{"rank":1,"domain":"a.com","chain":["AQID"],"error":""}` + "\n" + `{"rank":2,"dom`))
	f.Add([]byte("\n\n{}\n[]\nnull\n"))
	f.Add([]byte(`{"rank":1,"domain":"a.com","chain":[""],"error":""}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		n := 0
		st, err := ReadRecords(bytes.NewReader(in), func(r Record) error {
			n++
			if r.check() != nil {
				t.Fatalf("loader passed an invalid record %+v", r)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if st.Records != n {
			t.Fatalf("stats count %d records, callback saw %d", st.Records, n)
		}
		if st.Records+st.Malformed > bytes.Count(in, []byte("\n"))+1 {
			t.Fatalf("more records than lines: %+v", st)
		}
	})
}
