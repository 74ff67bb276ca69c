package check

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

func proofSources(t *testing.T, ttp *testbed.TTPs, now func() time.Time) (ct, rev Source) {
	t.Helper()
	ct, err := NewCTSource(ProofOptions{ProverURL: ttp.ProverURL, TTPKey: ttp.MirrorKey, LogKey: ttp.LogKey, MaxAge: 10 * time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	rev, err = NewRevocationSource(ProofOptions{ProverURL: ttp.ProverURL, TTPKey: ttp.RevocationKey, MaxAge: 10 * time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return ct, rev
}

// TestProofSourcesInVerdict runs "--require ct,revocation" end to end: real
// sites, notaries, log, revocation authority and prover on loopback.
func TestProofSourcesInVerdict(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{w.ca}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	// bank.test is logged and not revoked; shop.test is logged and revoked.
	for _, s := range []*testbed.Site{w.bank, w.shop} {
		if _, err := ttp.LogChain(ctx, s.Leaf().Chain); err != nil {
			t.Fatal(err)
		}
	}
	if err := ttp.Revoke(ctx, w.ca, w.shop.Leaf().Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	ct, rev := proofSources(t, ttp, nil)
	cfg := w.config(t, w.honest)
	cfg.Sources = []Source{ct, rev}
	cfg.Require = []string{"ca", "ct", "revocation"}
	c := newChecker(t, cfg)

	v, err := c.Check(ctx, target("bank.test"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Result != Trusted || len(v.Sources) != 3 {
		t.Fatalf("bank.test: %v %v %+v", v.Result, v.Reasons, v.Sources)
	}
	for _, a := range v.Sources {
		if a.Status != Pass || !a.Required {
			t.Errorf("bank.test: %+v", a)
		}
	}
	v, err = c.Check(ctx, target("shop.test"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Result != Untrusted || !strings.Contains(strings.Join(v.Reasons, " ")+v.Sources[2].Detail, "revoked") {
		t.Fatalf("revoked shop.test: %v %v %+v", v.Result, v.Reasons, v.Sources)
	}
}

func TestProofSourceAssess(t *testing.T) {
	ctx := context.Background()
	clk := time.Now()
	now := func() time.Time { return clk }
	root, _ := testbed.NewRootCA("Assess Root", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	ca, _ := root.NewIntermediate("Assess CA", testbed.ECDSAP256)
	unlogged, _ := ca.Issue(testbed.LeafOptions{DNSNames: []string{"u.test"}})
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	ct, rev := proofSources(t, ttp, now)
	obs := &probe.Observation{Chain: unlogged.Chain}
	if a := ct.Assess(ctx, obs); a.Status != Fail {
		t.Errorf("unlogged certificate: %+v", a)
	}
	if a := rev.Assess(ctx, obs); a.Status != Pass {
		t.Errorf("unrevoked certificate: %+v", a)
	}
	// A replayed (stale) root fails; an unreachable prover is unknown; no
	// chain is unknown.
	clk = clk.Add(11 * time.Minute)
	if a := rev.Assess(ctx, obs); a.Status != Fail || !strings.Contains(a.Detail, "older") {
		t.Errorf("stale root: %+v", a)
	}
	down, _ := NewRevocationSource(ProofOptions{ProverURL: "http://127.0.0.1:1", TTPKey: ttp.RevocationKey})
	if a := down.Assess(ctx, obs); a.Status != Unknown {
		t.Errorf("unreachable prover: %+v", a)
	}
	if a := ct.Assess(ctx, &probe.Observation{}); a.Status != Unknown {
		t.Errorf("no chain: %+v", a)
	}
	if _, err := NewCTSource(ProofOptions{ProverURL: ttp.ProverURL, TTPKey: "not a key"}); err == nil {
		t.Error("malformed pinned key accepted")
	}
}

// TestRevocationIssuerFromVerifiedPath revokes a leaf without an authority
// key identifier and serves it after an unrelated certificate: the
// revocation key must come from the issuer on the verified path, and with
// no verified path the source must not say "not revoked".
func TestRevocationIssuerFromVerifiedPath(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	root, _ := testbed.NewRootCA("Old Root", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	inter, _ := root.NewIntermediate("Old CA", testbed.ECDSAP256)
	leaf, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}, OmitAKI: true, OmitIntermediates: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.Cert.AuthorityKeyId) != 0 {
		t.Fatal("testbed issued the leaf with an authority key identifier")
	}
	otherRoot, _ := testbed.NewRootCA("Unrelated Root", testbed.ECDSAP256)
	unrelated, _ := otherRoot.NewIntermediate("Unrelated CA", testbed.ECDSAP256)
	if err := ttp.Revoke(ctx, inter, leaf.Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	_, rev := proofSources(t, ttp, nil)

	// Assessed alone, with no verified path: the issuer is unknown.
	obs := &probe.Observation{Target: target("bank.test"), Chain: [][]byte{leaf.Cert.Raw, unrelated.Cert.Raw}}
	if a := rev.Assess(ctx, obs); a.Status != Unknown || !strings.Contains(a.Detail, "issuer cannot be established") {
		t.Errorf("unrelated second certificate, no verified path: %+v", a)
	}

	cfg := w.config(t, w.honest)
	cfg.Roots = root.Pool()
	cfg.Sources = []Source{rev}
	cfg.Require = []string{"revocation"}
	cfg.CachePath = ""
	c := newChecker(t, cfg)
	for _, tc := range []struct {
		name   string
		chain  [][]byte
		ca     Status
		status Status
		detail string
	}{
		{"issuer second", [][]byte{leaf.Cert.Raw, inter.Cert.Raw}, Pass, Fail, "revoked: listed"},
		{"unrelated certificate second, issuer third", [][]byte{leaf.Cert.Raw, unrelated.Cert.Raw, inter.Cert.Raw}, Pass, Fail, "revoked: listed"},
		{"unrelated certificate second, no issuer", [][]byte{leaf.Cert.Raw, unrelated.Cert.Raw}, Fail, Unknown, "issuer cannot be established"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := c.CheckObservation(ctx, &probe.Observation{Target: target("bank.test"), Chain: tc.chain})
			if err != nil {
				t.Fatal(err)
			}
			ca, _ := v.Source("ca")
			a, _ := v.Source("revocation")
			if ca.Status != tc.ca || a.Status != tc.status || !strings.Contains(a.Detail, tc.detail) || v.Result == Trusted {
				t.Errorf("verdict %s; ca %+v; revocation %+v", v.Result, ca, a)
			}
		})
	}
}

// TestProofSourceRefusesCheckpointAsHead: a prover (or anyone on its path)
// that relays the mirror's sorted-tree root as a C2SP checkpoint, the form
// pkie signed before heads had their own type, is refused, although the
// mirror's key signed it: such a root binds the tree to no log checkpoint.
func TestProofSourceRefusesCheckpointAsHead(t *testing.T) {
	ctx := context.Background()
	root, _ := testbed.NewRootCA("Head Root", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	leaf, _ := root.Issue(testbed.LeafOptions{DNSNames: []string{"h.test"}})
	if _, err := ttp.LogChain(ctx, leaf.Chain); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	signer, err := checkpoint.ReadSignerFile(ttp.MirrorKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	headV, err := checkpoint.NewVerifier(ttp.MirrorKey)
	if err != nil {
		t.Fatal(err)
	}
	logV, err := checkpoint.NewLogVerifier(ttp.LogKey)
	if err != nil {
		t.Fatal(err)
	}
	upstream, _ := url.Parse(ttp.ProverURL)
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.ModifyResponse = func(r *http.Response) error {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			return err
		}
		r.Body.Close()
		h, err := checkpoint.OpenMirrorHeadAnyAge([]byte(body["checkpoint"].(string)), headV, logV)
		if err != nil {
			return err
		}
		old, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: h.Origin, Size: h.Size, Root: h.Root, Time: h.Time}, signer)
		if err != nil {
			return err
		}
		body["checkpoint"] = string(old)
		b, _ := json.Marshal(body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	obs := &probe.Observation{Chain: leaf.Chain}
	honest, _ := proofSources(t, ttp, nil)
	if a := honest.Assess(ctx, obs); a.Status != Pass || !strings.Contains(a.Detail, "built from log pkie.test/log's checkpoint") {
		t.Fatalf("through the prover: %+v", a)
	}
	ct, err := NewCTSource(ProofOptions{ProverURL: front.URL, TTPKey: ttp.MirrorKey, LogKey: ttp.LogKey, MaxAge: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if a := ct.Assess(ctx, obs); a.Status != Fail || !strings.Contains(a.Detail, "before sorted-tree heads") {
		t.Fatalf("a sorted-tree root relayed as a checkpoint: %+v", a)
	}
}
