package pecbench

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/testbed"
)

// SCTLogs is how many SCTs the throughput row's SCT site carries, from as
// many logs of distinct operators: Chrome's policy asks for two for a
// certificate of up to 180 days and three beyond, and most certificates
// carry two or three.
const SCTLogs = 3

// sctSite is the throughput row's site with SCTs, as a publicly trusted
// certificate is: the site's CAs and a padded RSA leaf, with SCTs from
// SCTLogs pkie logs embedded (a precertificate logged with add-pre-chain),
// the logs served on loopback and named in a v3 log list.
type sctSite struct {
	leaf      *testbed.Leaf
	certs     []*x509.Certificate
	chains    [][]*x509.Certificate
	listPath  string
	verifiers []pkie.Verifier
	closers   []func() error
}

var (
	oidPoison  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}
	oidSCTList = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
)

// sctListBytes is about what SCTLogs ECDSA SCTs add to a leaf: each about
// 120 bytes with its length, the list's length and the extension.
const sctListBytes = SCTLogs*122 + 20

func newSCTSite(ctx context.Context, w *world, dir string) (_ *sctSite, err error) {
	s := &sctSite{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	type benchLog struct {
		l      *ctlog.Log
		origin string
	}
	var logs []benchLog
	for i := range SCTLogs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		origin := ln.Addr().String()
		ldir := filepath.Join(dir, fmt.Sprintf("log%d", i))
		if _, err := ctlog.Init(ctx, ldir, origin, ctlog.InitOptions{Roots: w.root.PEM()}); err != nil {
			ln.Close()
			return nil, err
		}
		l, err := ctlog.Open(ctx, ldir, ctlog.Options{BatchMaxAge: 10 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
		if err != nil {
			ln.Close()
			return nil, err
		}
		srv := ctlog.NewHTTPServer(l.Handler(ctlog.HandlerOptions{}))
		go srv.Serve(ln)
		s.closers = append(s.closers, func() error { return errors.Join(srv.Close(), l.Close()) })
		logs = append(logs, benchLog{l, origin})
	}
	// The logs hold the world's other certificates too, so that audit
	// paths have the depth of the mirror's sorted-tree proofs beside them.
	for _, bl := range logs {
		if err := bl.l.AddChains(ctx, w.fill); err != nil {
			return nil, err
		}
	}
	// The leaf: the site's names padded so that, with its SCTs, the chain
	// is the paper's flight, under the same CAs.
	padded, err := PaddedLeaf(w.inter, "scts."+siteName, testbed.RSA2048, PaperFlightBytes-sctListBytes)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	c := padded.Cert
	tmpl := x509.Certificate{SerialNumber: serial, Subject: c.Subject, DNSNames: c.DNSNames, NotBefore: c.NotBefore, NotAfter: c.NotAfter,
		KeyUsage: c.KeyUsage, ExtKeyUsage: c.ExtKeyUsage, AuthorityKeyId: c.AuthorityKeyId}
	pre := tmpl
	pre.ExtraExtensions = []pkix.Extension{{Id: oidPoison, Critical: true, Value: asn1.NullBytes}}
	preDER, err := x509.CreateCertificate(rand.Reader, &pre, w.inter.Cert, padded.Key.Public(), w.inter.Key)
	if err != nil {
		return nil, fmt.Errorf("pecbench: precertificate: %w", err)
	}
	var scts [][]byte
	now := time.Now()
	var listed []*loglist.Log
	for i, bl := range logs {
		resp, err := bl.l.AddChain(ctx, append([][]byte{preDER}, w.inter.Chain()...), true)
		if err != nil {
			return nil, fmt.Errorf("pecbench: logging the precertificate: %w", err)
		}
		b, err := ctlog.MarshalSCT(&resp.SCT)
		if err != nil {
			return nil, err
		}
		scts = append(scts, b)
		u := "http://" + bl.origin + "/"
		listed = append(listed, &loglist.Log{Key: bl.l.PublicKey(), Description: fmt.Sprintf("bench log %d", i),
			Operator: fmt.Sprintf("Bench Operator %d", i), Kind: loglist.Static, URL: u, MonitoringURL: u, MMD: 24 * time.Hour,
			State: loglist.Usable, StateSince: now.Add(-24 * time.Hour).UTC().Truncate(time.Second)})
	}
	list, err := sct.MarshalList(scts)
	if err != nil {
		return nil, err
	}
	ext, err := asn1.Marshal(list)
	if err != nil {
		return nil, err
	}
	final := tmpl
	final.ExtraExtensions = []pkix.Extension{{Id: oidSCTList, Value: ext}}
	der, err := x509.CreateCertificate(rand.Reader, &final, w.inter.Cert, padded.Key.Public(), w.inter.Key)
	if err != nil {
		return nil, fmt.Errorf("pecbench: final certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	s.leaf = &testbed.Leaf{Cert: cert, Key: padded.Key, Chain: append([][]byte{der}, w.inter.Chain()...)}
	inter := x509.NewCertPool()
	for _, der := range s.leaf.Chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		s.certs = append(s.certs, c)
		inter.AddCert(c)
	}
	if s.chains, err = cert.Verify(x509.VerifyOptions{Roots: w.root.Pool(), Intermediates: inter, DNSName: "scts." + siteName}); err != nil {
		return nil, err
	}
	lb, err := loglist.Write(listed, now)
	if err != nil {
		return nil, err
	}
	s.listPath = filepath.Join(dir, "log_list.json")
	if err := os.WriteFile(s.listPath, lb, 0o644); err != nil {
		return nil, err
	}
	cv, err := ct.NewVerifier(ct.VerifierConfig{LogList: s.listPath, HTTP: &http.Client{Timeout: 10 * time.Second}}.JSON())
	if err != nil {
		return nil, err
	}
	s.verifiers = []pkie.Verifier{cv}
	for _, v := range w.verifiers {
		if v.ID() != pkie.CT {
			s.verifiers = append(s.verifiers, v)
		}
	}
	return s, nil
}

func (s *sctSite) subject() pkie.Subject {
	return pkie.Subject{ServerName: "scts." + siteName, Port: 443, Chain: s.leaf.Chain, Certs: s.certs}
}

func (s *sctSite) close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
