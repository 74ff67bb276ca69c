// Package sctworld builds, on loopback and in process, the part of the Web
// that Certificate Transparency is about: CT logs run by distinct
// operators, a v3 log list naming them, a CA that issues precertificates,
// has them logged with add-pre-chain and embeds the SCTs in the final
// certificates (RFC 6962 §3), and HTTPS sites serving those certificates,
// some with SCTs in the TLS extension or a stapled OCSP response instead.
//
// Each site is a case a client's ct verifier must get right (Sites): a
// compliant certificate, one with a forged SCT, one with an SCT from a log
// the list does not name, one with too few SCTs for Chrome's and Apple's
// policies, and compliant ones whose SCTs arrive by TLS or OCSP. Every log
// sits behind a front that Log.Stop takes off the network, for outages.
//
// The logs are pkie's own (internal/ctlog) unless a StartFunc says
// otherwise; internal/sctworld/sctworldtest starts TesseraCT as one of
// them. The package imports no testing code, so "pkie demo" builds on it.
package sctworld

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/testbed"
)

// The sites of a world, one per case.
const (
	Good      = "good.sct.test"     // embedded SCTs from every listed log: compliant
	Spare     = "spare.sct.test"    // as Good, another certificate, for outage tests
	Forged    = "forged.sct.test"   // embedded, one listed log's SCT with a forged signature
	Unlisted  = "unlisted.sct.test" // embedded, one listed log's SCT and one from the unlisted log
	OneSCT    = "one-sct.sct.test"  // embedded, one listed log's SCT only: too few for Chrome and Apple
	TLS       = "tls.sct.test"      // an x509 entry; every listed log's SCT in the TLS extension
	OCSP      = "ocsp.sct.test"     // an x509 entry; every listed log's SCT in a stapled OCSP response
	NoSCT     = "no-sct.sct.test"   // never logged, no SCT
	Operator1 = "Operator One"      // the first listed log's operator
	Operator2 = "Operator Two"      // the second's
	Operator3 = "Unlisted Operator" // the unlisted log's
)

// Compliant reports whether the site's certificate satisfies Chrome's and
// Apple's policies in a fresh world.
func Compliant(site string) bool { return site == Good || site == Spare || site == TLS || site == OCSP }

// Options configure a world.
type Options struct {
	// Dir holds the logs and the log list; empty means a temporary
	// directory removed on Close.
	Dir string
	// Logs start the two listed logs (operators Operator1 and Operator2)
	// and the unlisted one, in that order; a nil entry, or a missing one,
	// is a pkie log (PKIELog).
	Logs [3]StartFunc
	// Port80 puts a log's front on port 80 of a random 127/8 address
	// (where it can be bound), for a log that refuses an origin with a
	// port, as TesseraCT v0.1.1 does. pkie's log takes either.
	Port80 [3]bool
}

// World is a running world.
type World struct {
	Root, CA *testbed.CA // the CA hierarchy; CA issues the sites' certificates
	// Logs are the listed logs, then the unlisted one.
	Logs []*Log
	// ListPath is the v3 JSON log list naming the listed logs; List its
	// bytes.
	ListPath string
	List     []byte
	Sites    map[string]*Site

	dir     string
	tempDir string
}

// New starts the logs, writes the list, issues and logs the certificates
// and starts the sites.
func New(ctx context.Context, o Options) (_ *World, err error) {
	w := &World{Sites: map[string]*Site{}}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	w.dir = o.Dir
	if w.dir == "" {
		if w.dir, err = os.MkdirTemp("", "pkie-sctworld-"); err != nil {
			return nil, err
		}
		w.tempDir = w.dir
	}
	if w.Root, err = testbed.NewRootCA("SCT World Root", testbed.ECDSAP256); err != nil {
		return nil, err
	}
	if w.CA, err = w.Root.NewIntermediate("SCT World Issuing CA", testbed.ECDSAP256); err != nil {
		return nil, err
	}
	specs := []struct{ desc, op string }{{"log one", Operator1}, {"log two", Operator2}, {"unlisted log", Operator3}}
	for i, s := range specs {
		start := o.Logs[i]
		if start == nil {
			start = PKIELog(dirFor(w.dir, fmt.Sprint(i)))
		}
		l, err := StartLog(ctx, "SCT World "+s.desc, s.op, start, w.Root.Cert, o.Port80[i])
		if err != nil {
			return nil, err
		}
		l.Listed = i < 2
		w.Logs = append(w.Logs, l)
	}
	if w.List, err = WriteList(w.Logs, time.Now()); err != nil {
		return nil, err
	}
	w.ListPath = filepath.Join(w.dir, "log_list.json")
	if err := atomicfile.WriteFile(w.ListPath, w.List, 0o644); err != nil {
		return nil, err
	}
	return w, w.issue(ctx)
}

// issue makes every site's certificate, logs it and starts the site.
func (w *World) issue(ctx context.Context) error {
	one, two, unlisted := w.Logs[0], w.Logs[1], w.Logs[2]
	embedded := []struct {
		site string
		logs []*Log
		edit func(scts [][]byte)
	}{
		{Good, []*Log{one, two}, nil},
		{Spare, []*Log{one, two}, nil},
		{Forged, []*Log{one, two}, func(s [][]byte) { s[1] = Forge(s[1]) }},
		{Unlisted, []*Log{one, unlisted}, nil},
		{OneSCT, []*Log{one}, nil},
	}
	for _, e := range embedded {
		p, err := IssuePrecert(w.CA, e.site)
		if err != nil {
			return err
		}
		var scts [][]byte
		for _, l := range e.logs {
			s, err := l.Submit(ctx, p.Chain, true)
			if err != nil {
				return fmt.Errorf("sctworld: %s: %w", e.site, err)
			}
			scts = append(scts, s)
		}
		if e.edit != nil {
			e.edit(scts)
		}
		leaf, err := p.Final(scts...)
		if err != nil {
			return err
		}
		if err := w.start(e.site, leaf, nil, nil); err != nil {
			return err
		}
	}
	for _, site := range []string{TLS, OCSP} {
		leaf, err := IssueX509(w.CA, site)
		if err != nil {
			return err
		}
		var scts [][]byte
		for _, l := range []*Log{one, two} {
			s, err := l.Submit(ctx, leaf.Chain, false)
			if err != nil {
				return fmt.Errorf("sctworld: %s: %w", site, err)
			}
			scts = append(scts, s)
		}
		if site == TLS {
			err = w.start(site, leaf, scts, nil)
		} else {
			var resp []byte
			if resp, err = OCSPResponse(w.CA, leaf.Cert, scts); err == nil {
				err = w.start(site, leaf, nil, resp)
			}
		}
		if err != nil {
			return err
		}
	}
	leaf, err := IssueX509(w.CA, NoSCT)
	if err != nil {
		return err
	}
	return w.start(NoSCT, leaf, nil, nil)
}

// Issue makes another site, name, whose certificate embeds an SCT from
// each of logs, as the world's own embedded cases do: for a test that
// needs a certificate logged after something else happened (a cache
// filled, a checkpoint fetched).
func (w *World) Issue(ctx context.Context, name string, logs ...*Log) (*Site, error) {
	if _, ok := w.Sites[name]; ok {
		return nil, fmt.Errorf("sctworld: site %s exists", name)
	}
	p, err := IssuePrecert(w.CA, name)
	if err != nil {
		return nil, err
	}
	var scts [][]byte
	for _, l := range logs {
		s, err := l.Submit(ctx, p.Chain, true)
		if err != nil {
			return nil, fmt.Errorf("sctworld: %s: %w", name, err)
		}
		scts = append(scts, s)
	}
	leaf, err := p.Final(scts...)
	if err != nil {
		return nil, err
	}
	if err := w.start(name, leaf, nil, nil); err != nil {
		return nil, err
	}
	return w.Sites[name], nil
}

func (w *World) start(name string, leaf *testbed.Leaf, scts [][]byte, resp []byte) error {
	s, err := StartSite(name, leaf, scts, resp)
	if err != nil {
		return err
	}
	w.Sites[name] = s
	return nil
}

// Site returns the named site; it panics on a name the world lacks.
func (w *World) Site(name string) *Site {
	s, ok := w.Sites[name]
	if !ok {
		panic("sctworld: no site " + name)
	}
	return s
}

// SiteNames lists the sites in a fixed order.
func SiteNames() []string { return []string{Good, Spare, Forged, Unlisted, OneSCT, TLS, OCSP, NoSCT} }

// Resolve maps every site's name to its loopback address, as "pkie check
// --resolve" and the notary prover's configuration take them.
func (w *World) Resolve() map[string]string {
	m := map[string]string{}
	for n, s := range w.Sites {
		m[n] = s.Addr.String()
	}
	return m
}

// RootsPEM is the world's root in PEM, for a client's --roots.
func (w *World) RootsPEM() []byte { return w.Root.PEM() }

// Close stops the sites and the logs and removes a temporary directory.
func (w *World) Close() error {
	var errs []error
	for _, s := range w.Sites {
		errs = append(errs, s.Close())
	}
	for _, l := range w.Logs {
		errs = append(errs, l.Close())
	}
	if w.tempDir != "" {
		errs = append(errs, os.RemoveAll(w.tempDir))
	}
	return errors.Join(errs...)
}

// WriteList is a v3 JSON log list (loglist.Write) naming the listed logs
// among logs as static-ct-api logs, one operator each, usable since a day
// before ts.
func WriteList(logs []*Log, ts time.Time) ([]byte, error) {
	var ll []*loglist.Log
	for _, l := range logs {
		if l.Listed {
			ll = append(ll, l.ListEntry(ts))
		}
	}
	return loglist.Write(ll, ts)
}

// ListEntry is the log as a log list names it at ts: usable since a day
// before, no temporal interval.
func (l *Log) ListEntry(ts time.Time) *loglist.Log {
	return &loglist.Log{ID: l.ID, Key: l.Key, SPKI: l.SPKI, Description: l.Description, Operator: l.Operator,
		Kind: loglist.Static, URL: l.URL + "/", MonitoringURL: l.URL + "/", MMD: l.MMD,
		State: loglist.Usable, StateSince: ts.Add(-24 * time.Hour).UTC().Truncate(time.Second)}
}
