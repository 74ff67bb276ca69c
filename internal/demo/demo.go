// Package demo runs pkie's main job offline: an in-process world of TLS
// sites, three notaries (one at global distance), a static-ct-api CT log
// and a mirror of it that signs the sorted tree of its certificates, a
// revocation authority, a PEC cloud proving against both, and a man in the middle on
// the client's path; and a client that checks every site the way
// "pkie check --cloud" does, requiring CA validation, the notaries, and CT
// and revocation proofs delivered by the cloud. The intercepted site is
// presented with a forged certificate that chains to a trusted root, so
// classic CA validation accepts it; the notaries, who see the real
// certificate from their own paths, do not, and the log never saw it.
// Three more sites serve genuine certificates that the notaries see too:
// one was revoked and one was never logged, and the cloud's proofs show
// it; the third carries an SCT, but from a log the client's CT log list
// does not name, and the client's CT policy (Chrome's) refuses it.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/sctworld"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/pec"
	"github.com/pkie/pkie/probe"
)

// The sites the demo adds to testbed.DemoTopology: genuine certificates
// from the legitimate issuing CA, served on every path, that only the
// cloud's proofs catch.
const (
	RevokedSite     = "revoked.test"      // logged, then revoked by its CA
	UnloggedSite    = "unlogged.test"     // never submitted to the log
	UnlistedLogSite = "unlisted-log.test" // one embedded SCT, from a log not in the client's log list
	// SCTSite is a trusted site whose certificate embeds SCTs from both
	// logs the client's list names, as a publicly trusted one does: the
	// cloud proves their inclusion, Chrome's CT policy is met.
	SCTSite = "news.test"
)

// The CT policy the demo's client applies to SCTs, and the operators of
// the demo's logs.
const (
	CTPolicy       = "chrome"
	DemoOperator   = "pkie demo"
	OtherOperator  = "pkie demo too"
	RogueOperator  = "Rogue Operator"
	listedLogName  = "pkie demo log"
	otherLogName   = "pkie demo log two"
	unlistedLogTag = "rogue log"
)

// SiteResult is what the client concluded about one site.
type SiteResult struct {
	Site        string         `json:"site"`
	Verdict     string         `json:"verdict"`
	Headline    string         `json:"headline"` // what decided the verdict
	Reasons     []string       `json:"reasons"`
	Intercepted bool           `json:"intercepted"`  // ground truth: the MitM was on the client's path
	Revoked     bool           `json:"revoked"`      // ground truth: its certificate is revoked
	Unlogged    bool           `json:"unlogged"`     // ground truth: its certificate was never logged
	UnlistedLog bool           `json:"unlisted_log"` // ground truth: its only SCT is from a log not in the client's list
	CA          string         `json:"ca"`           // what CA validation alone said
	Visit       int            `json:"visit"`        // 1: first visit; 2: return visit (local cache)
	FromCache   bool           `json:"from_cache"`
	Timings     check.Timings  `json:"timings"`
	Notaries    []NotaryResult `json:"notaries"`
	// Proofs are the verifiers' findings on the cloud's proofs (ct,
	// revocation).
	Proofs []ProofResult `json:"proofs"`
}

// ProofResult is one enhancement's finding on the proof the cloud
// delivered.
type ProofResult struct {
	PKIE   string `json:"pkie"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// NotaryResult is one notary's answer as the client saw it.
type NotaryResult struct {
	Name        string  `json:"name"`
	Vote        string  `json:"vote"`
	Detail      string  `json:"detail,omitempty"`
	RoundTripMS float64 `json:"round_trip_ms"`
}

// Options configure a run.
type Options struct {
	// Progress receives a line per step; nil for none.
	Progress io.Writer
	// Revisit checks every site a second time to show the local cache.
	Revisit bool
}

// Run builds the world, checks every site and tears the world down.
func Run(ctx context.Context, o Options) ([]SiteResult, error) {
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	opts := testbed.DemoTopology()
	fmt.Fprintf(progress, "starting %d sites, %d notaries and a MitM on the client's path …\n", len(opts.Sites)+2, len(opts.Notaries))
	tp, err := testbed.StartTopology(opts)
	if err != nil {
		return nil, err
	}
	defer tp.Close()
	// tp.Close stops the added sites too.
	if err := addSites(tp); err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "pkie-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	fmt.Fprintf(progress, "starting three more CT logs, two of two operators in the client's log list and one not; %s's certificate gets SCTs from the two, %s's from the other …\n", SCTSite, UnlistedLogSite)
	listPath, closeLogs, err := addCTPolicySite(ctx, tp, dir)
	if err != nil {
		return nil, err
	}
	defer closeLogs()

	fmt.Fprintf(progress, "starting a static-ct-api CT log, a mirror of it, a revocation authority and a PEC cloud proving against both …\n")
	ttps, err := testbed.StartTTPs(testbed.TTPOptions{Dir: filepath.Join(dir, "ttps"), Roots: []*testbed.CA{tp.Root}})
	if err != nil {
		return nil, err
	}
	defer ttps.Close()
	if err := publish(ctx, tp, ttps); err != nil {
		return nil, err
	}
	cloud, err := testbed.StartCloud(ctx, testbed.CloudOptions{Name: "pec.demo", TTPs: ttps, CTLogList: listPath, DataDir: filepath.Join(dir, "cloud")})
	if err != nil {
		return nil, err
	}
	defer cloud.Close()
	client, err := pec.Dial(ctx, pec.ClientConfig{Clouds: []*pec.Bundle{cloud.Bundle}})
	if err != nil {
		return nil, fmt.Errorf("demo: registering with the cloud: %w", err)
	}
	defer client.Close()
	// The TTP keys come from the TTPs themselves, never from the cloud;
	// the log list is the client's own.
	verifiers, err := clientVerifiers(ttps, listPath)
	if err != nil {
		return nil, err
	}

	var bundles []*check.Bundle
	for _, n := range tp.Notaries {
		raw, err := n.Bundle.MarshalIndent()
		if err != nil {
			return nil, err
		}
		b, err := check.ParseBundle(raw)
		if err != nil {
			return nil, fmt.Errorf("demo: notary %s bundle: %w", n.Name, err)
		}
		bundles = append(bundles, b)
	}
	c, err := check.New(check.Config{
		Notaries:     bundles,
		Lookup:       tp.ClientPath.Lookup,
		AllowPrivate: true,
		Roots:        tp.Root.Pool(),
		CachePath:    filepath.Join(dir, "cache.db"),
		Verifiers:    verifiers,
		Proofs:       &pec.CloudProofs{Cloud: client},
		Require:      []string{"ca", "ct", "revocation"},
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()

	sites := append([]string{}, siteNames(opts)...)
	sites = append(sites, RevokedSite, UnloggedSite, UnlistedLogSite)
	intercepted := map[string]bool{}
	for _, name := range opts.Intercept {
		intercepted[name] = true
	}
	visits := 1
	if o.Revisit {
		visits = 2
	}
	var out []SiteResult
	for visit := 1; visit <= visits; visit++ {
		for _, name := range sites {
			fmt.Fprintf(progress, "visit %d: checking %s …\n", visit, name)
			v, err := c.Check(ctx, probe.Target{Host: name, Port: 443})
			if err != nil {
				return nil, fmt.Errorf("demo: checking %s: %w", name, err)
			}
			r := SiteResult{
				Site: name, Verdict: string(v.Result), Headline: v.Headline, Reasons: v.Reasons, Intercepted: intercepted[name],
				Revoked: name == RevokedSite, Unlogged: name == UnloggedSite, UnlistedLog: name == UnlistedLogSite,
				Visit: visit, FromCache: v.FromCache, Timings: v.Timings,
			}
			if a, ok := v.Source("ca"); ok {
				r.CA = string(a.Status)
			}
			for _, id := range []string{"ct", "revocation"} {
				if a, ok := v.Source(id); ok {
					r.Proofs = append(r.Proofs, ProofResult{PKIE: id, Status: string(a.Status), Detail: a.Detail})
				}
			}
			for _, a := range v.Notaries {
				r.Notaries = append(r.Notaries, NotaryResult{Name: a.Notary, Vote: a.Vote.String(), Detail: a.Reason, RoundTripMS: float64(a.RoundTrip) / 1e6})
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// Caught reports whether the results show the demo's point: every
// intercepted, revoked, unlogged or unlisted-log site untrusted, every
// other site trusted.
func Caught(rs []SiteResult) bool {
	for _, r := range rs {
		bad := r.Intercepted || r.Revoked || r.Unlogged || r.UnlistedLog
		if bad != (r.Verdict == string(check.Untrusted)) {
			return false
		}
		if !bad && r.Verdict != string(check.Trusted) {
			return false
		}
	}
	return len(rs) > 0
}

func siteNames(o testbed.TopologyOptions) []string {
	var out []string
	for _, s := range o.Sites {
		out = append(out, s.Name)
	}
	return out
}

// addSites starts the revoked and the unlogged site, reachable on every
// path: the MitM intercepts neither, so the notaries agree with the
// client about both.
func addSites(tp *testbed.Topology) error {
	for _, name := range []string{RevokedSite, UnloggedSite} {
		leaf, err := tp.Issuing.Issue(testbed.LeafOptions{DNSNames: []string{name}, Alg: testbed.ECDSAP256})
		if err != nil {
			return err
		}
		s, err := testbed.StartSite(name, leaf, nil)
		if err != nil {
			return err
		}
		tp.Sites = append(tp.Sites, s)
		tp.NotaryPath.Set(name, s.Addr)
		tp.ClientPath.Set(name, s.Addr)
	}
	return nil
}

// publish logs every genuine site's chain but the unlogged one's and the
// one whose SCT the rogue log signed (add-chain,
// each returning once a checkpoint covers it), revokes the revoked site's
// certificate through a CRL from its CA, and has the authority sign its
// tree and the mirror follow the log, so the cloud's provers sync them as
// they start.
func publish(ctx context.Context, tp *testbed.Topology, ttps *testbed.TTPs) error {
	for _, s := range tp.Sites {
		if s.Name == UnloggedSite || s.Name == UnlistedLogSite {
			continue
		}
		if _, err := ttps.LogChain(ctx, s.Leaf().Chain); err != nil {
			return fmt.Errorf("demo: logging %s: %w", s.Name, err)
		}
	}
	rs := tp.Site(RevokedSite)
	if err := ttps.Revoke(ctx, tp.Issuing, rs.Leaf().Cert.SerialNumber); err != nil {
		return fmt.Errorf("demo: revoking %s: %w", RevokedSite, err)
	}
	return ttps.Refresh(ctx)
}

// addCTPolicySite starts three CT logs of pkie's own (internal/ctlog) on
// loopback, each under the origin its URL names: two of two operators,
// which the client's log list names, and a rogue one it does not. It
// writes the list; gives SCTSite a certificate whose precertificate both
// listed logs logged, with their SCTs embedded; and starts
// UnlistedLogSite, serving a certificate from the legitimate issuing CA
// whose one embedded SCT is the rogue log's. The rogue log is real: it
// logged the precertificate and signed the SCT; the client refuses it for
// not being a log it trusts.
func addCTPolicySite(ctx context.Context, tp *testbed.Topology, dir string) (string, func(), error) {
	var logs []*sctworld.Log
	closeAll := func() {
		for _, l := range logs {
			l.Close()
		}
	}
	for i, spec := range []struct {
		name, operator string
		listed         bool
	}{{listedLogName, DemoOperator, true}, {otherLogName, OtherOperator, true}, {unlistedLogTag, RogueOperator, false}} {
		l, err := sctworld.StartLog(ctx, spec.name, spec.operator, sctworld.PKIELog(filepath.Join(dir, "ctlogs", fmt.Sprint(i))), tp.Root.Cert, false)
		if err != nil {
			closeAll()
			return "", nil, err
		}
		l.Listed = spec.listed
		logs = append(logs, l)
	}
	list, err := sctworld.WriteList(logs, time.Now())
	if err != nil {
		closeAll()
		return "", nil, err
	}
	listPath := filepath.Join(dir, "log_list.json")
	if err := os.WriteFile(listPath, list, 0o644); err != nil {
		closeAll()
		return "", nil, err
	}
	if err := withSCTs(ctx, tp, SCTSite, logs[0], logs[1]); err != nil {
		closeAll()
		return "", nil, fmt.Errorf("demo: %s: %w", SCTSite, err)
	}
	p, err := sctworld.IssuePrecert(tp.Issuing, UnlistedLogSite)
	if err == nil {
		var sct []byte
		if sct, err = logs[2].Submit(ctx, p.Chain, true); err == nil {
			var leaf *testbed.Leaf
			if leaf, err = p.Final(sct); err == nil {
				var s *testbed.Site
				if s, err = testbed.StartSite(UnlistedLogSite, leaf, nil); err == nil {
					tp.Sites = append(tp.Sites, s)
					tp.NotaryPath.Set(UnlistedLogSite, s.Addr)
					tp.ClientPath.Set(UnlistedLogSite, s.Addr)
				}
			}
		}
	}
	if err != nil {
		closeAll()
		return "", nil, fmt.Errorf("demo: %s: %w", UnlistedLogSite, err)
	}
	return listPath, closeAll, nil
}

// withSCTs renews the certificate of the topology's site name with one
// whose precertificate each of logs logged, their SCTs embedded.
func withSCTs(ctx context.Context, tp *testbed.Topology, name string, logs ...*sctworld.Log) error {
	var site *testbed.Site
	for _, s := range tp.Sites {
		if s.Name == name {
			site = s
		}
	}
	if site == nil {
		return errors.New("no such site")
	}
	p, err := sctworld.IssuePrecert(tp.Issuing, name)
	if err != nil {
		return err
	}
	scts := make([][]byte, len(logs))
	for i, l := range logs {
		if scts[i], err = l.Submit(ctx, p.Chain, true); err != nil {
			return err
		}
	}
	leaf, err := p.Final(scts...)
	if err != nil {
		return err
	}
	site.SetLeaf(leaf)
	return nil
}

// clientVerifiers are the client's ct verifier (the log list and Chrome's
// CT policy for certificates with SCTs, the mirror's pinned keys for those
// without) and revocation verifier.
func clientVerifiers(ttps *testbed.TTPs, listPath string) ([]pkie.Verifier, error) {
	ctc := ttps.CTVerifierConfig()
	ctc.LogList, ctc.Policy = listPath, CTPolicy
	cv, err := ct.NewVerifier(ctc.JSON())
	if err != nil {
		return nil, fmt.Errorf("demo: ct verifier: %w", err)
	}
	rv, err := revocation.NewVerifier(revocation.VerifierConfig{Key: ttps.RevocationKey}.JSON())
	if err != nil {
		return nil, fmt.Errorf("demo: revocation verifier: %w", err)
	}
	return []pkie.Verifier{cv, rv}, nil
}
