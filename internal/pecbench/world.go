package pecbench

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/big"
	"math/rand/v2"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/testbed"
)

// world is what the cloud rows share: a CA hierarchy, a log and a
// revocation authority with trees of some size, and the site's leaf of
// realistic size, logged and not revoked (the paper's common case).
type world struct {
	root, inter *testbed.CA // inter issues the leaf; its own issuer is an intermediate too
	leaf        *testbed.Leaf
	certs       []*x509.Certificate // leaf.Chain parsed
	ttps        *testbed.TTPs
	verifiers   []pkie.Verifier
	// chains are the leaf's verified chains, as classic validation builds
	// them before any proof is checked.
	chains [][]*x509.Certificate
	// fill are the other logged chains (not revoked): the leaves of sites
	// the cloud has not seen before, for the throughput row's new-leaf run.
	fill [][][]byte
}

const siteName = "site.test"

// benchCertCache is the cloud's parsed-certificate cache in the bench.
const benchCertCache = 256

// newWorld builds the world: logFill other certificates in the log and
// revokedFill other serials revoked, so that the trees, and with them the
// proofs, have realistic depths.
func newWorld(ctx context.Context, logFill, revokedFill int, progress func(string, ...any)) (_ *world, err error) {
	w := &world{} // not the named result, which an error return sets to nil before the cleanup runs
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	if w.root, err = testbed.NewRootCA("PEC Bench Root", testbed.RSA2048); err != nil {
		return nil, err
	}
	// Three certificates, as many real flights carry (leaf, issuing CA,
	// a cross-signed or policy CA), the leaf padded to the paper's size
	// with more names.
	upper, err := w.root.NewIntermediate("PEC Bench Policy CA", testbed.RSA2048)
	if err != nil {
		return nil, err
	}
	if w.inter, err = upper.NewIntermediate("PEC Bench Issuing CA", testbed.RSA2048); err != nil {
		return nil, err
	}
	if w.leaf, err = PaddedLeaf(w.inter, siteName, testbed.RSA2048, PaperFlightBytes); err != nil {
		return nil, err
	}
	if w.ttps, err = testbed.StartTTPs(testbed.TTPOptions{Roots: []*testbed.CA{w.root}}); err != nil {
		return nil, err
	}
	progress("logging the site's chain and %d others, revoking %d other serials", logFill, revokedFill)
	chains := [][][]byte{w.leaf.Chain}
	for i := range logFill {
		l, err := w.inter.Issue(testbed.LeafOptions{DNSNames: []string{fmt.Sprintf("fill%d.test", i)}})
		if err != nil {
			return nil, err
		}
		chains = append(chains, l.Chain)
		w.fill = append(w.fill, l.Chain)
	}
	if err := w.ttps.LogChains(ctx, chains); err != nil {
		return nil, fmt.Errorf("pecbench: %w", err)
	}
	if revokedFill > 0 {
		rng := rand.New(rand.NewPCG(1, 2))
		serials := make([]*big.Int, 0, revokedFill)
		for len(serials) < revokedFill {
			s := new(big.Int).SetUint64(rng.Uint64() | 1<<62)
			if s.Cmp(w.leaf.Cert.SerialNumber) != 0 {
				serials = append(serials, s)
			}
		}
		if err := w.ttps.Revoke(ctx, w.inter, serials...); err != nil {
			return nil, err
		}
	}
	if err := w.ttps.Refresh(ctx); err != nil {
		return nil, err
	}
	if w.verifiers, err = w.ttps.ClientVerifiers(); err != nil {
		return nil, err
	}
	inter := x509.NewCertPool()
	for _, der := range w.leaf.Chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		w.certs = append(w.certs, c)
		inter.AddCert(c)
	}
	if w.chains, err = w.leaf.Cert.Verify(x509.VerifyOptions{Roots: w.root.Pool(), Intermediates: inter, DNSName: siteName}); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *world) close() {
	if w.ttps != nil {
		w.ttps.Close()
	}
}

// subject is the site's chain as a verifier gets it.
func (w *world) subject() pkie.Subject {
	return pkie.Subject{ServerName: siteName, Port: 443, Chain: w.leaf.Chain, Certs: w.certs}
}

// requests are the common case's: CT and revocation.
func commonCase() []pkie.Request {
	return []pkie.Request{{ID: pkie.CT}, {ID: pkie.Revocation}}
}

// benchCloudConfig lifts the per-address shares for a benchmark: every
// client of a run comes from 127.0.0.1, which a public cloud's shares are
// there to refuse. The totals stay.
func benchCloudConfig(sessions int) cloud.Config {
	return cloud.Config{
		MaxSessionsPerAddr: max(2*sessions, cloud.DefaultMaxSessionsAddr),
		MaxJobsPerAddr:     cloud.DefaultMaxJobs,
		SubmitRate:         -1,
		SessionSubmitRate:  -1,
		// Small enough that the new-leaf run's leaves always miss it while
		// the intermediates every chain shares stay in it.
		CertCache: benchCertCache,
	}
}

// startCloud starts a cloud on w's TTPs.
func (w *world) startCloud(ctx context.Context, name string, cfg cloud.Config) (*testbed.Cloud, error) {
	return testbed.StartCloud(ctx, testbed.CloudOptions{Name: name, TTPs: w.ttps, Config: cfg})
}

// treeSizes are the log's and the authority's tree sizes as synced.
func (w *world) treeSizes() [2]uint64 {
	return [2]uint64{w.ttps.CTMirror.Status().Size, w.ttps.RevProver.Status().Size}
}

// depth is the length of the longest audit path in a tree of n leaves.
func depth(n uint64) int {
	d := 0
	for s := uint64(1); s < n; s <<= 1 {
		d++
	}
	return d
}
