package ct_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/loglist"
	ctpkie "github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/sctworld"
	"github.com/pkie/pkie/internal/sctworld/sctworldtest"
	"github.com/pkie/pkie/internal/testbed"
)

// counter is a reverse proxy in front of a log's monitoring prefix that
// counts the requests the prover makes to the log.
type counter struct {
	srv *httptest.Server
	n   atomic.Int64
}

func newCounter(t *testing.T, target string) *counter {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// logBuffer collects a prover's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sctWorld is an sctworld (two listed pkie logs run by two operators, an
// unlisted one, and sites whose certificates carry their SCTs) with a log
// list whose monitoring URLs go through counting proxies.
type sctWorld struct {
	*sctworld.World
	list     *loglist.List
	listPath string
	counters []*counter // of the listed logs, in order
}

func newSCTWorld(t *testing.T) *sctWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := sctworld.New(ctx, sctworld.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	sw := &sctWorld{World: w}
	now := time.Now()
	var entries []*loglist.Log
	for _, l := range w.Logs {
		if !l.Listed {
			continue
		}
		c := newCounter(t, l.URL)
		sw.counters = append(sw.counters, c)
		e := l.ListEntry(now)
		e.MonitoringURL = c.srv.URL + "/"
		entries = append(entries, e)
	}
	b, err := loglist.Write(entries, now)
	if err != nil {
		t.Fatal(err)
	}
	sw.listPath = filepath.Join(t.TempDir(), "log_list.json")
	if err := os.WriteFile(sw.listPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if sw.list, err = loglist.Parse(b); err != nil {
		t.Fatal(err)
	}
	return sw
}

func (w *sctWorld) requests() int64 {
	var n int64
	for _, c := range w.counters {
		n += c.n.Load()
	}
	return n
}

func (w *sctWorld) prover(t *testing.T, c ctprover.ProverConfig, logs *logBuffer) *ctprover.Prover {
	t.Helper()
	c.LogList = w.listPath
	env := pkie.ProverEnv{DataDir: t.TempDir()}
	if logs != nil {
		env.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := ctprover.NewProver(context.Background(), env, c.JSON())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.(*ctprover.Prover).Close() })
	return p.(*ctprover.Prover)
}

func siteSubject(s *sctworld.Site) pkie.Subject {
	return leafSubject(s.Name, s.Leaf)
}

func leafSubject(name string, l *testbed.Leaf) pkie.Subject {
	certs := make([]*x509.Certificate, len(l.Chain))
	for i, der := range l.Chain {
		certs[i], _ = x509.ParseCertificate(der)
	}
	return pkie.Subject{ServerName: name, Port: 443, Chain: l.Chain, Certs: certs}
}

// params are what a client sends: the SCTs it received in TLS and OCSP.
func params(t *testing.T, s *sctworld.Site) []byte {
	t.Helper()
	raw := append([][]byte(nil), s.SCTs...)
	if len(s.OCSP) > 0 {
		scts, err := sct.FromOCSP(s.OCSP, s.Leaf.Cert)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range scts {
			raw = append(raw, x.Raw)
		}
	}
	if len(raw) == 0 {
		return nil
	}
	b, err := sct.MarshalList(raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, p *pkie.Proof) *ctpkie.Body {
	t.Helper()
	if p.ID != pkie.CT || p.Version != ctpkie.BodyVersion {
		t.Fatalf("proof %s version %d, want ct version %d", p.ID, p.Version, ctpkie.BodyVersion)
	}
	var b ctpkie.Body
	if err := b.UnmarshalBinary(p.Body); err != nil {
		t.Fatal(err)
	}
	return &b
}

// verifyEvidence checks each evidence as a client would, against the log
// list and the SCTs of the request, and returns the status per log
// description.
func verifyEvidence(t *testing.T, list *loglist.List, subj pkie.Subject, sent []byte, b *ctpkie.Body) map[string]string {
	t.Helper()
	scts, errs := sct.Collect(subj.Certs[0], nil, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(sent) > 0 {
		more, err := sct.ParseList(sent, sct.TLSExtension)
		if err != nil {
			t.Fatal(err)
		}
		scts = append(scts, more...)
	}
	byHash := map[[32]byte]*sct.SCT{}
	for _, s := range scts {
		byHash[s.Hash()] = s
	}
	got := map[string]string{}
	for i := range b.Inclusions {
		e := &b.Inclusions[i]
		l := list.Lookup(e.LogID)
		s := byHash[e.SCTHash]
		if l == nil || s == nil || s.LogID != e.LogID {
			t.Fatalf("evidence %d is about an SCT or a log the request did not have", i)
		}
		if e.Status == ctinclusion.LookupFailed {
			got[l.Description] = "lookup failed: " + e.Message
			continue
		}
		entry, err := sct.EntryFor(s, subj.Certs[0], subj.Certs[1])
		if err != nil {
			t.Fatal(err)
		}
		res, err := ctinclusion.Verify(e, l, entry.LeafHash(s))
		if err != nil {
			t.Fatalf("evidence %d from %s does not verify: %v", i, l.Description, err)
		}
		got[l.Description] = res.Status.String()
	}
	return got
}

// TestProveSCTs: for each site of the world, what the prover proves, as a
// client verifies it with the log list.
func TestProveSCTs(t *testing.T) {
	w := newSCTWorld(t)
	p := w.prover(t, ctprover.ProverConfig{}, nil)
	ctx := context.Background()
	one, two := w.Logs[0].Description, w.Logs[1].Description
	for _, tc := range []struct {
		site string
		want map[string]string // by log description
	}{
		{sctworld.Good, map[string]string{one: "included", two: "included"}},
		{sctworld.TLS, map[string]string{one: "included", two: "included"}},
		{sctworld.OCSP, map[string]string{one: "included", two: "included"}},
		// The unlisted log's SCT gets no evidence: the client's list
		// decides what it means.
		{sctworld.Unlisted, map[string]string{one: "included"}},
		{sctworld.OneSCT, map[string]string{one: "included"}},
		// An SCT whose signature does not verify is not looked up.
		{sctworld.Forged, map[string]string{one: "included"}},
	} {
		t.Run(tc.site, func(t *testing.T) {
			s := w.Site(tc.site)
			subj := siteSubject(s)
			sent := params(t, s)
			proof, err := p.Prove(ctx, &pkie.ProveRequest{Subject: subj, Params: sent})
			if err != nil {
				t.Fatal(err)
			}
			b := decode(t, proof)
			if b.Tree != nil {
				t.Error("a sorted-tree part without a mirror")
			}
			got := verifyEvidence(t, w.list, subj, sent, b)
			if len(got) != len(tc.want) {
				t.Fatalf("evidence %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// TestProveCache: a second request for the same certificate is answered
// from the cache, without a request to either log; evidence a client's
// Params brought is keyed by the SCT and certificate it is about, so
// another certificate's SCTs sent as Params make no lookup and change no
// entry.
func TestProveCache(t *testing.T) {
	w := newSCTWorld(t)
	p := w.prover(t, ctprover.ProverConfig{}, nil)
	ctx := context.Background()
	good := siteSubject(w.Site(sctworld.Good))
	first, err := p.Prove(ctx, &pkie.ProveRequest{Subject: good})
	if err != nil {
		t.Fatal(err)
	}
	before, lookups := w.requests(), p.Lookups()
	if before == 0 || lookups != 2 {
		t.Fatalf("the first proof made %d requests and %d lookups, want some and 2", before, lookups)
	}
	second, err := p.Prove(ctx, &pkie.ProveRequest{Subject: good})
	if err != nil {
		t.Fatal(err)
	}
	if after := w.requests(); after != before || p.Lookups() != lookups {
		t.Fatalf("a cached proof made %d more requests to the logs and %d more lookups", after-before, p.Lookups()-lookups)
	}
	if !bytes.Equal(first.Body, second.Body) {
		t.Error("the cached proof differs from the first")
	}
	// The TLS site's SCTs sent with the good site's certificate: they
	// do not verify for it, so nothing is fetched or stored.
	mixed, err := p.Prove(ctx, &pkie.ProveRequest{Subject: good, Params: params(t, w.Site(sctworld.TLS))})
	if err != nil {
		t.Fatal(err)
	}
	if w.requests() != before || p.Lookups() != lookups {
		t.Fatal("SCTs of another certificate sent as parameters made the prover look them up")
	}
	if got := verifyEvidence(t, w.list, good, nil, decode(t, mixed)); len(got) != 2 {
		t.Fatalf("evidence %v", got)
	}
	if !bytes.Equal(mixed.Body, first.Body) {
		t.Error("another certificate's SCTs changed the good site's proof")
	}

	// The TLS site's certificate logged again: each log signs its SCT
	// for the original entry anew (other bytes, the same leaf hash). The
	// evidence is the cached one, naming the SCTs this request sent.
	tls := w.Site(sctworld.TLS)
	if _, err := p.Prove(ctx, &pkie.ProveRequest{Subject: siteSubject(tls), Params: params(t, tls)}); err != nil {
		t.Fatal(err)
	}
	before, lookups = w.requests(), p.Lookups()
	var again [][]byte
	for _, l := range w.Logs[:2] {
		s, err := l.Submit(ctx, tls.Leaf.Chain, false)
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, s)
	}
	if bytes.Equal(again[0], tls.SCTs[0]) {
		t.Fatal("the log returned the same SCT bytes")
	}
	sent, err := sct.MarshalList(again)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := p.Prove(ctx, &pkie.ProveRequest{Subject: siteSubject(tls), Params: sent})
	if err != nil {
		t.Fatal(err)
	}
	if w.requests() != before || p.Lookups() != lookups {
		t.Fatal("SCTs signed again for a cached entry were looked up again")
	}
	if got := verifyEvidence(t, w.list, siteSubject(tls), sent, decode(t, proof)); len(got) != 2 || got[w.Logs[1].Description] != "included" {
		t.Fatalf("evidence for the SCTs signed again: %v", got)
	}
}

// TestProveLogDown: a log that is off the network makes its SCT's
// evidence LookupFailed, naming the log (and logged at WARN with its
// name), while the other log's evidence is Included. Evidence a prover
// cached before the outage is still served.
func TestProveLogDown(t *testing.T) {
	w := newSCTWorld(t)
	var logs logBuffer
	before := w.prover(t, ctprover.ProverConfig{}, nil)
	ctx := context.Background()
	good, spare := siteSubject(w.Site(sctworld.Good)), siteSubject(w.Site(sctworld.Spare))
	if _, err := before.Prove(ctx, &pkie.ProveRequest{Subject: good}); err != nil {
		t.Fatal(err)
	}
	w.Logs[1].Stop()
	two := w.Logs[1].Description
	// A prover that starts during the outage: nothing of log two cached.
	p := w.prover(t, ctprover.ProverConfig{}, &logs)
	proof, err := p.Prove(ctx, &pkie.ProveRequest{Subject: spare})
	if err != nil {
		t.Fatal(err)
	}
	got := verifyEvidence(t, w.list, spare, nil, decode(t, proof))
	if got[w.Logs[0].Description] != "included" || !strings.HasPrefix(got[two], "lookup failed: log "+two) {
		t.Fatalf("evidence with log two down: %v", got)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, two) {
		t.Errorf("the failed lookup was not logged at WARN naming the log:\n%s", out)
	}
	if f := p.LookupFailures(); len(f) != 1 || f[two+" ("+loglist.ShortID(w.Logs[1].ID)+")"] == 0 {
		t.Errorf("lookup failures %v", f)
	}
	if err := p.Health(); err != nil {
		t.Errorf("a prover with a log list is unhealthy because one log is down: %v", err)
	}
	// The prover that cached the good site's evidence serves it still.
	proof, err = before.Prove(ctx, &pkie.ProveRequest{Subject: good})
	if err != nil {
		t.Fatal(err)
	}
	if got := verifyEvidence(t, w.list, good, nil, decode(t, proof)); got[two] != "included" {
		t.Fatalf("cached evidence not served during the outage: %v", got)
	}
}

// TestProveBadRequests: what the prover refuses, with ErrUnsupported and
// a message saying why.
func TestProveBadRequests(t *testing.T) {
	w := newSCTWorld(t)
	p := w.prover(t, ctprover.ProverConfig{}, nil)
	good := siteSubject(w.Site(sctworld.Good))
	oneSCT := w.Site(sctworld.TLS).SCTs[0]
	many := make([][]byte, ctprover.MaxSCTs+1)
	for i := range many {
		many[i] = oneSCT
	}
	tooMany, err := sct.MarshalList(many)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		subject pkie.Subject
		params  []byte
		err     string
	}{
		{"not an SCT list", good, []byte("hello, cloud"), "not an SCT list"},
		{"truncated list", good, params(t, w.Site(sctworld.TLS))[:50], "not an SCT list"},
		{"too long", good, make([]byte, ctprover.MaxParams+1), "at most 4096"},
		{"too many SCTs", good, tooMany, "at most 16"},
		{"no certificate", pkie.Subject{}, nil, "no certificate"},
		{"no SCT and no mirror", siteSubject(w.Site(sctworld.NoSCT)), nil, "no SCT in the certificate or the request, and no mirror configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Prove(context.Background(), &pkie.ProveRequest{Subject: tc.subject, Params: tc.params})
			if !errors.Is(err, pkie.ErrUnsupported) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want ErrUnsupported saying %q", err, tc.err)
			}
		})
	}
	if p.Lookups() != 0 {
		t.Errorf("bad requests made %d lookups", p.Lookups())
	}
}

// TestProveWithMirror: a prover with both halves proves a certificate with
// no SCT by the mirror's sorted tree, as before, and a certificate with
// SCTs by their inclusion evidence alone.
func TestProveWithMirror(t *testing.T) {
	w := newSCTWorld(t)
	root, _ := testbed.NewRootCA("CT Root", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	logged, err := root.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := ttp.LogChain(ctx, logged.Chain); err != nil {
		t.Fatal(err)
	}
	p := w.prover(t, ttp.CTProverConfig(), nil)
	if err := p.Health(); err != nil {
		t.Fatal(err)
	}
	subj := leafSubject("www.example.test", logged)
	proof, err := p.Prove(ctx, &pkie.ProveRequest{Subject: subj})
	if err != nil {
		t.Fatal(err)
	}
	b := decode(t, proof)
	if b.Tree == nil || len(b.Inclusions) != 0 {
		t.Fatalf("no SCT: tree %v, %d inclusions; want the tree alone", b.Tree != nil, len(b.Inclusions))
	}
	c := ttp.CTVerifierConfig()
	pin, err := treeproof.ParseMirrorPin(c.Key, c.LogKey, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := treeproof.VerifyCT(subj.Chain, b.Tree.Response(treeproof.CT), pin, time.Now()); err != nil || !b.Tree.Present {
		t.Fatalf("the sorted-tree part: present %v, %v", b.Tree.Present, err)
	}
	good := siteSubject(w.Site(sctworld.Good))
	proof, err = p.Prove(ctx, &pkie.ProveRequest{Subject: good})
	if err != nil {
		t.Fatal(err)
	}
	if b := decode(t, proof); b.Tree != nil || len(verifyEvidence(t, w.list, good, nil, b)) != 2 {
		t.Fatalf("with SCTs: tree %v, %d inclusions; want two inclusions alone", b.Tree != nil, len(b.Inclusions))
	}
}

// TestLogListReload: a list that fails to load keeps the previous one;
// a good one replaces it.
func TestLogListReload(t *testing.T) {
	w := newSCTWorld(t)
	var logs logBuffer
	p := w.prover(t, ctprover.ProverConfig{}, &logs)
	ctx := context.Background()
	good, err := os.ReadFile(w.listPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.listPath, []byte("{not a list"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.LoadLogList(ctx); err == nil {
		t.Fatal("a broken list loaded")
	}
	if l := p.LogList(); l == nil || len(l.Logs) != 2 {
		t.Fatal("the previous list was dropped")
	}
	if err := p.Health(); err != nil {
		t.Errorf("unhealthy with the previous list in use: %v", err)
	}
	if _, err := p.Prove(ctx, &pkie.ProveRequest{Subject: siteSubject(w.Site(sctworld.Good))}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.listPath, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.LoadLogList(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestProverConfigs: configurations refused, each naming its field.
func TestProverConfigs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	list := filepath.Join(dir, "list.json")
	b, err := loglist.Write(nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(list, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ctprover.NewProver(ctx, pkie.ProverEnv{}, ctprover.ProverConfig{LogList: list}.JSON()); err != nil {
		t.Fatalf("a list alone: %v", err)
	}
	for _, tc := range []struct{ config, want string }{
		{`{}`, "log_list"},
		{`{"log_list":"` + filepath.Join(dir, "missing.json") + `"}`, "log_list"},
		{`{"log_list":"` + list + `","log_list_signature":"x"}`, "log_list_public_key"},
		{`{"log_list":"` + list + `","log_list_signature":"x","log_list_public_key":"` + list + `"}`, "log_list_public_key"},
		{`{"log_list":"` + list + `","inclusion_cache":-1}`, "inclusion_cache"},
		{`{"log_list":"` + list + `","checkpoint_refresh":"-1h"}`, "checkpoint_refresh"},
		{`{"log_list":"` + list + `","mirror_key_file":"x"}`, "need log_url"},
		{`{"inclusion_cache":5}`, "log_list"},
		{`{"log_list":"http://"}`, "log_list"},
	} {
		_, err := ctprover.NewProver(ctx, pkie.ProverEnv{DataDir: t.TempDir()}, []byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.config, err, tc.want)
		}
		if err := ctprover.CheckProverConfig([]byte(tc.config)); err == nil && !strings.Contains(tc.config, "missing") {
			t.Errorf("CheckProverConfig accepted %s", tc.config)
		}
	}
}

// TestProveTesseraCT: the same with TesseraCT (transparency-dev's
// static-ct-api log) as one of the two listed logs: the evidence of both
// SCTs, one from each implementation, verifies.
func TestProveTesseraCT(t *testing.T) {
	w := sctworldtest.Start(t)
	pi, err := ctprover.NewProver(context.Background(), pkie.ProverEnv{}, ctprover.ProverConfig{LogList: w.ListPath}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	p := pi.(*ctprover.Prover)
	list := p.LogList()
	for _, site := range []string{sctworld.Good, sctworld.TLS} {
		s := w.Site(site)
		subj, sent := siteSubject(s), params(t, s)
		proof, err := p.Prove(context.Background(), &pkie.ProveRequest{Subject: subj, Params: sent})
		if err != nil {
			t.Fatal(err)
		}
		got := verifyEvidence(t, list, subj, sent, decode(t, proof))
		if len(got) != 2 || got[w.Logs[0].Description] != "included" || got[w.Logs[1].Description] != "included" {
			t.Fatalf("%s: %v", site, got)
		}
	}
}
