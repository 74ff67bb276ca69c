// Package demo runs pkie's main job offline: an in-process world of TLS
// sites, three notaries (one at global distance) and a man in the middle on
// the client's path, and a client that checks every site the way
// "pkie check" does. The intercepted site is presented with a forged
// certificate that chains to a trusted root, so classic CA validation
// accepts it; the notaries, who see the real certificate from their own
// paths, do not.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// SiteResult is what the client concluded about one site.
type SiteResult struct {
	Site        string         `json:"site"`
	Verdict     string         `json:"verdict"`
	Headline    string         `json:"headline"` // what decided the verdict
	Reasons     []string       `json:"reasons"`
	Intercepted bool           `json:"intercepted"` // ground truth: the MitM was on the client's path
	CA          string         `json:"ca"`          // what CA validation alone said
	Visit       int            `json:"visit"`       // 1: first visit; 2: return visit (local cache)
	FromCache   bool           `json:"from_cache"`
	Timings     check.Timings  `json:"timings"`
	Notaries    []NotaryResult `json:"notaries"`
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
	fmt.Fprintf(progress, "starting %d sites, %d notaries and a MitM on the client's path …\n", len(opts.Sites), len(opts.Notaries))
	tp, err := testbed.StartTopology(opts)
	if err != nil {
		return nil, err
	}
	defer tp.Close()

	dir, err := os.MkdirTemp("", "pkie-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var bundles []*check.Bundle
	for _, n := range tp.Notaries {
		raw, err := n.Bundle.MarshalIndent()
		if err != nil {
			return nil, err
		}
		b, err := consensus.ParseBundle(raw)
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
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()

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
		for _, s := range opts.Sites {
			fmt.Fprintf(progress, "visit %d: checking %s …\n", visit, s.Name)
			v, err := c.Check(ctx, probe.Target{Host: s.Name, Port: 443})
			if err != nil {
				return nil, fmt.Errorf("demo: checking %s: %w", s.Name, err)
			}
			r := SiteResult{
				Site: s.Name, Verdict: string(v.Result), Headline: v.Headline, Reasons: v.Reasons, Intercepted: intercepted[s.Name],
				Visit: visit, FromCache: v.FromCache, Timings: v.Timings,
			}
			if a, ok := v.Source("ca"); ok {
				r.CA = string(a.Status)
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
// intercepted site untrusted, every other site trusted.
func Caught(rs []SiteResult) bool {
	for _, r := range rs {
		if r.Intercepted != (r.Verdict == string(check.Untrusted)) {
			return false
		}
		if !r.Intercepted && r.Verdict != string(check.Trusted) {
			return false
		}
	}
	return len(rs) > 0
}
