package ct

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctgo "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/jsonclient"
	cttls "github.com/google/certificate-transparency-go/tls"
	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/crypto/ocsp"
	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/sct"
)

// TestVerifierConfig: the mirror's key and the log's key go together; a
// log list alone, a mirror alone or both make a verifier; a configuration
// that cannot verify anything is refused, naming the field, and mmd is
// gone.
func TestVerifierConfig(t *testing.T) {
	_, mirrorKey, _ := checkpoint.GenerateKey("mirror.pkie.test/ct")
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	logKey, err := fnote.RFC6962VerifierString("log.pkie.test/2026", ek.Public())
	if err != nil {
		t.Fatal(err)
	}
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaKey, _ := fnote.RFC6962VerifierString("log.pkie.test/2026", rk.Public())
	_, sameName, _ := checkpoint.GenerateKey("log.pkie.test/2026")
	list := writeList(t, newTestLog(t, "Op A", "A 'Alpha2026'").log)
	for _, c := range []VerifierConfig{
		{Key: mirrorKey, LogKey: logKey},
		{LogList: list},
		{LogList: list, Policy: "apple", Inclusion: InclusionOptional},
		{LogList: list, Key: mirrorKey, LogKey: logKey, Policy: "one", Fetch: true},
	} {
		if _, err := NewVerifier(c.JSON()); err != nil {
			t.Errorf("%s: %v", c.JSON(), err)
		}
	}
	for _, tc := range []struct {
		name, config, want string
	}{
		{"mmd", `{"key":"` + mirrorKey + `","log_key":"` + logKey + `","mmd":"24h"}`, "mmd"},
		{"nothing", `{}`, "log_list"},
		{"no key", string(VerifierConfig{LogKey: logKey}.JSON()), "key"},
		{"no log key (the single-key form of pkie's old log)", string(VerifierConfig{Key: mirrorKey}.JSON()), "log_key"},
		{"RSA log key", string(VerifierConfig{Key: mirrorKey, LogKey: rsaKey}.JSON()), "ECDSA P-256"},
		{"junk log key", string(VerifierConfig{Key: mirrorKey, LogKey: "junk"}.JSON()), "log key"},
		{"log key as mirror key", string(VerifierConfig{Key: logKey, LogKey: logKey}.JSON()), "mirror key"},
		{"mirror named like the log", string(VerifierConfig{Key: sameName, LogKey: logKey}.JSON()), "name of its own"},
		{"negative max_age", `{"key":"` + mirrorKey + `","log_key":"` + logKey + `","max_age":"-1h"}`, "max_age"},
		{"policy without a list", string(VerifierConfig{Key: mirrorKey, LogKey: logKey, Policy: "chrome"}.JSON()), "need log_list"},
		{"unknown policy", string(VerifierConfig{LogList: list, Policy: "firefox"}.JSON()), "firefox"},
		{"unknown inclusion", string(VerifierConfig{LogList: list, Inclusion: "sometimes"}.JSON()), "inclusion"},
		{"signature without its key", string(VerifierConfig{LogList: list, LogListSignature: list + ".sig"}.JSON()), "log_list_public_key"},
		{"missing list", string(VerifierConfig{LogList: filepath.Join(t.TempDir(), "none.json")}.JSON()), "log_list"},
		{"list that is not one", string(VerifierConfig{LogList: writeFile(t, "junk.json", []byte("{]"))}.JSON()), "log_list"},
		{"max_list_age without a list", string(VerifierConfig{Key: mirrorKey, LogKey: logKey, MaxListAge: Duration(time.Hour)}.JSON()), "max_list_age needs log_list"},
		{"negative max_list_age", `{"log_list":"` + list + `","max_list_age":"-1h"}`, "max_list_age must be positive"},
	} {
		_, err := NewVerifier([]byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// A testLog is a static-ct-api log made in the test: a P-256 key that
// signs SCTs (with leaf_index) and checkpoints (RFC6962NoteSignature) over
// a Merkle tree of leaf hashes kept in memory. It lets a test make the
// evidence a real log could sign at any time, including against an SCT.
type testLog struct {
	key    *ecdsa.PrivateKey
	log    *loglist.Log
	leaves [][32]byte
}

func newTestLog(t testing.TB, operator, desc string) *testLog {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spki, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	host := strings.ToLower(strings.NewReplacer(" ", "-", "'", "").Replace(desc)) + ".log.test"
	l := &testLog{key: key, log: &loglist.Log{ID: sha256.Sum256(spki), Key: key.Public(), SPKI: spki,
		Description: desc, Operator: operator, Kind: loglist.Static,
		URL: "https://" + host + "/", MonitoringURL: "https://" + host + "/",
		MMD: 24 * time.Hour, State: loglist.Usable, StateSince: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}}
	l.fill(t, 5)
	return l
}

// fill appends n leaves of other certificates.
func (l *testLog) fill(t testing.TB, n int) {
	for range n {
		var h [32]byte
		if _, err := rand.Read(h[:]); err != nil {
			t.Fatal(err)
		}
		l.leaves = append(l.leaves, h)
	}
}

// sctFor signs an SCT for leaf at ts, delivered from src (TLS or OCSP: an
// x509_entry), and appends its entry to the tree.
func (l *testLog) sctFor(t testing.TB, leaf *x509.Certificate, ts time.Time, src sct.Source) *sct.SCT {
	t.Helper()
	i := uint64(len(l.leaves))
	s := &sct.SCT{LogID: l.log.ID, Timestamp: uint64(ts.UnixMilli()), Source: src,
		Extensions: []byte{0, 0, 5, byte(i >> 32), byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}}
	e, err := sct.EntryFor(s, leaf, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256(e.SignedInput(s))
	sig, err := ecdsa.SignASN1(rand.Reader, l.key, d[:])
	if err != nil {
		t.Fatal(err)
	}
	raw := []byte{0}
	raw = append(raw, l.log.ID[:]...)
	raw = binary.BigEndian.AppendUint64(raw, s.Timestamp)
	raw = binary.BigEndian.AppendUint16(raw, uint16(len(s.Extensions)))
	raw = append(raw, s.Extensions...)
	raw = append(raw, 4, 3)
	raw = binary.BigEndian.AppendUint16(raw, uint16(len(sig)))
	raw = append(raw, sig...)
	out, err := sct.Parse(raw, src)
	if err != nil {
		t.Fatal(err)
	}
	l.leaves = append(l.leaves, e.LeafHash(out))
	return out
}

// checkpoint signs a checkpoint of the tree's first size leaves (or of
// leaves, when given) at ts.
func (l *testLog) checkpoint(t testing.TB, size uint64, ts time.Time, leaves [][32]byte) []byte {
	t.Helper()
	if leaves == nil {
		leaves = l.leaves
	}
	root := mth(leaves[:size])
	body := log.Checkpoint{Origin: l.log.Origin(), Size: size, Hash: root[:]}.Marshal()
	h := sha256.New()
	h.Write([]byte(l.log.Origin()))
	h.Write([]byte{0x0a, 0x05})
	h.Write(l.log.ID[:])
	s := &noteSigner{name: l.log.Origin(), hash: binary.BigEndian.Uint32(h.Sum(nil)), key: l.key, ms: uint64(ts.UnixMilli()), size: size, root: root}
	msg, err := note.Sign(&note.Note{Text: string(body)}, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// included is the evidence that s is in a checkpoint of the whole tree
// signed at ts.
func (l *testLog) included(t testing.TB, s *sct.SCT, ts time.Time) ctinclusion.Evidence {
	t.Helper()
	i, _, _ := s.LeafIndex()
	return ctinclusion.Evidence{SCTHash: s.Hash(), LogID: s.LogID, Status: ctinclusion.Included, LeafIndex: i,
		Checkpoint: l.checkpoint(t, uint64(len(l.leaves)), ts, nil), Proof: path(int(i), l.leaves)}
}

// notYet is the evidence of a checkpoint signed at ts that stops just
// before s's entry.
func (l *testLog) notYet(t testing.TB, s *sct.SCT, ts time.Time) ctinclusion.Evidence {
	t.Helper()
	i, _, _ := s.LeafIndex()
	return ctinclusion.Evidence{SCTHash: s.Hash(), LogID: s.LogID, Status: ctinclusion.NotYet, LeafIndex: i,
		Checkpoint: l.checkpoint(t, i, ts, nil)}
}

// conflict is a checkpoint signed at ts over a tree that holds another
// certificate's leaf where s's entry should be.
func (l *testLog) conflict(t testing.TB, s *sct.SCT, ts time.Time) ctinclusion.Evidence {
	t.Helper()
	i, _, _ := s.LeafIndex()
	forked := append([][32]byte(nil), l.leaves...)
	forked[i] = sha256.Sum256([]byte("another certificate"))
	return ctinclusion.Evidence{SCTHash: s.Hash(), LogID: s.LogID, Status: ctinclusion.Conflict, LeafIndex: i, Leaf: forked[i],
		Checkpoint: l.checkpoint(t, uint64(len(forked)), ts, forked), Proof: path(int(i), forked)}
}

// noteSigner signs a checkpoint as static-ct-api says: the note signature
// is a timestamp and an RFC 6962 TreeHeadSignature (ECDSA P-256, SHA-256)
// of the size and root.
type noteSigner struct {
	name string
	hash uint32
	key  *ecdsa.PrivateKey
	ms   uint64
	size uint64
	root [32]byte
}

func (s *noteSigner) Name() string    { return s.name }
func (s *noteSigner) KeyHash() uint32 { return s.hash }
func (s *noteSigner) Sign([]byte) ([]byte, error) {
	th := []byte{0, 1}
	th = binary.BigEndian.AppendUint64(th, s.ms)
	th = binary.BigEndian.AppendUint64(th, s.size)
	th = append(th, s.root[:]...)
	d := sha256.Sum256(th)
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, d[:])
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint64(nil, s.ms)
	out = append(out, 4, 3)
	out = binary.BigEndian.AppendUint16(out, uint16(len(sig)))
	return append(out, sig...), nil
}

// mth and path are RFC 6962 §2.1's Merkle tree hash and audit path, over
// leaf hashes, written from the RFC: the verifier checks paths with
// transparency-dev/merkle, an independent implementation.
func mth(leaves [][32]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := split(len(leaves))
	return node(mth(leaves[:k]), mth(leaves[k:]))
}

func path(m int, leaves [][32]byte) [][32]byte {
	if len(leaves) <= 1 {
		return nil
	}
	k := split(len(leaves))
	if m < k {
		return append(path(m, leaves[:k]), mth(leaves[k:]))
	}
	return append(path(m-k, leaves[k:]), mth(leaves[:k]))
}

func split(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

func node(l, r [32]byte) [32]byte {
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// writeList writes logs as a v3 log list file and returns its path.
func writeList(t testing.TB, logs ...*loglist.Log) string {
	t.Helper()
	b, err := loglist.Write(logs, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "log_list.json", b)
}

func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func proofOf(t testing.TB, evs ...ctinclusion.Evidence) *pkie.Proof {
	t.Helper()
	b, err := (&Body{Inclusions: evs}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return &pkie.Proof{ID: pkie.CT, Version: BodyVersion, Body: b}
}

// testCA is a throwaway root CA that issues the tests' leaves (package
// testbed's would do, but it links this package).
type testCA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

type testLeaf struct {
	Cert  *x509.Certificate
	Chain [][]byte
}

func newCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ct verifier test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{Cert: c, Key: key}
}

// issue signs a 90-day leaf for name.
func (ca *testCA) issue(t testing.TB, name string) *testLeaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testLeaf{Cert: c, Chain: [][]byte{der, ca.Cert.Raw}}
}

// ocspWith is an OCSP response for leaf carrying scts in its single
// response, as a CA's responder that logs certificates staples it.
func ocspWith(t testing.TB, ca *testCA, leaf *x509.Certificate, scts ...*sct.SCT) []byte {
	t.Helper()
	raws := make([][]byte, len(scts))
	for i, s := range scts {
		raws[i] = s.Raw
	}
	list, err := sct.MarshalList(raws)
	if err != nil {
		t.Fatal(err)
	}
	val, err := asn1.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ocsp.CreateResponse(ca.Cert, ca.Cert, ocsp.Response{Status: ocsp.Good, SerialNumber: leaf.SerialNumber,
		ThisUpdate: time.Now().Add(-time.Hour), NextUpdate: time.Now().Add(24 * time.Hour),
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 5}, Value: val}}}, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// world is the fixture of TestVerify: one leaf, three logs of three
// operators (C not in the list), and SCTs of it from each.
type world struct {
	ca         *testCA
	leaf       *testLeaf
	a, b, c    *testLog
	sa, sb, sc *sct.SCT // TLS-delivered, signed an hour before now
	sbOCSP     *sct.SCT // B's, delivered in a stapled OCSP response
	list       string   // A and B
	listABC    string   // A, B and C
	now        time.Time
}

func newWorld(t testing.TB) *world {
	t.Helper()
	ca := newCA(t)
	leaf := ca.issue(t, "site.ct.test")
	w := &world{ca: ca, leaf: leaf, now: time.Now().Truncate(time.Millisecond)}
	w.a = newTestLog(t, "Op A", "A 'Alpha2026'")
	w.b = newTestLog(t, "Op B", "B 'Beta2026'")
	w.c = newTestLog(t, "Op C", "C 'Gamma2026'")
	at := w.now.Add(-time.Hour)
	w.sa = w.a.sctFor(t, leaf.Cert, at, sct.TLSExtension)
	w.sb = w.b.sctFor(t, leaf.Cert, at, sct.TLSExtension)
	w.sc = w.c.sctFor(t, leaf.Cert, at, sct.TLSExtension)
	w.sbOCSP = w.b.sctFor(t, leaf.Cert, at.Add(time.Second), sct.OCSP)
	for _, l := range []*testLog{w.a, w.b, w.c} {
		l.fill(t, 3)
	}
	w.list = writeList(t, w.a.log, w.b.log)
	w.listABC = writeList(t, w.a.log, w.b.log, w.c.log)
	return w
}

func raws(scts ...*sct.SCT) [][]byte {
	out := make([][]byte, len(scts))
	for i, s := range scts {
		out[i] = s.Raw
	}
	return out
}

// forged is s with one bit of its signature flipped.
func forged(t testing.TB, s *sct.SCT) *sct.SCT {
	t.Helper()
	raw := append([]byte(nil), s.Raw...)
	raw[len(raw)-1] ^= 1
	f, err := sct.Parse(raw, s.Source)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestVerify: the contract's decision, case by case, on SCTs delivered in
// TLS and OCSP, from logs in and out of the list, with inclusion evidence
// of every kind. Each reason must name the policy and the evidence that
// decided.
func TestVerify(t *testing.T) {
	w := newWorld(t)
	now := w.now
	late := now.Add(26 * time.Hour) // past the SCTs' 24h merge deadline
	for _, tc := range []struct {
		name      string
		cfg       VerifierConfig
		list      string // "": A and B
		scts      [][]byte
		ocsp      []byte
		proof     *pkie.Proof
		now       time.Time
		want      pkie.Status
		wantWords []string
	}{
		{name: "two SCTs of two operators, both included",
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now.Add(-time.Minute)), w.b.included(t, w.sb, now.Add(-2*time.Minute))),
			want:  pkie.Pass, wantWords: []string{"Chrome CT policy met by 2 SCTs (A 'Alpha2026', B 'Beta2026')", "both included (checkpoints of 9 and 10 entries)"}},
		{name: "a log list younger than max_list_age is relied on",
			cfg:   VerifierConfig{MaxListAge: Duration(400 * 24 * time.Hour)},
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now), w.b.included(t, w.sb, now)),
			want:  pkie.Pass, wantWords: []string{"Chrome CT policy met by 2 SCTs"}},
		{name: "a log list older than max_list_age leaves SCTs unjudged",
			cfg:   VerifierConfig{MaxListAge: Duration(loglist.EnforcementTimeout)},
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now), w.b.included(t, w.sb, now)),
			want:  pkie.Unknown, wantWords: []string{"published 2026-01-01T00:00:00Z, is older than max_list_age (70 days)"}},
		{name: "one TLS SCT and one from a stapled OCSP response",
			scts: raws(w.sa), ocsp: ocspWith(t, w.ca, w.leaf.Cert, w.sbOCSP),
			proof: proofOf(t, w.a.included(t, w.sa, now), w.b.included(t, w.sbOCSP, now)),
			want:  pkie.Pass, wantWords: []string{"Chrome CT policy met by 2 SCTs", "both included"}},
		{name: "one included, one a promise within the merge delay",
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now), w.b.notYet(t, w.sb, now.Add(-time.Minute))),
			want:  pkie.Pass, wantWords: []string{"1 included (checkpoint of 9 entries)", "SCT from B 'Beta2026' not yet in a checkpoint, within its 24h merge delay (promise)"}},
		{name: "forged SCT",
			scts:  raws(w.sa, forged(t, w.sb)),
			proof: proofOf(t, w.a.included(t, w.sa, now)),
			want:  pkie.Fail, wantWords: []string{"Chrome CT policy not met", "B 'Beta2026'", "invalid signature"}},
		{name: "log not in the list",
			scts: raws(w.sa, w.sc),
			want: pkie.Fail, wantWords: []string{"Chrome CT policy not met", "not in the log list"}},
		{name: "too few SCTs for Chrome",
			scts: raws(w.sa),
			want: pkie.Fail, wantWords: []string{"Chrome CT policy not met", "needs 2"}},
		{name: "one SCT is enough for policy one",
			cfg:   VerifierConfig{Policy: "one"},
			scts:  raws(w.sa),
			proof: proofOf(t, w.a.included(t, w.sa, now)),
			want:  pkie.Pass, wantWords: []string{"one-SCT policy met by 1 SCT (A 'Alpha2026'), included (checkpoint of 9 entries)"}},
		{name: "no evidence, inclusion required",
			scts: raws(w.sa, w.sb),
			want: pkie.Unknown, wantWords: []string{"Chrome CT policy met by 2 SCTs", "but inclusion unknown", "no evidence for log A 'Alpha2026' (no CT proof)", "B 'Beta2026'"}},
		{name: "no evidence, inclusion optional",
			cfg:  VerifierConfig{Inclusion: InclusionOptional},
			scts: raws(w.sa, w.sb),
			want: pkie.Pass, wantWords: []string{"Chrome CT policy met by 2 SCTs", "inclusion unknown: no evidence for log A 'Alpha2026'"}},
		{name: "evidence for one log only",
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now)),
			want:  pkie.Unknown, wantWords: []string{"but inclusion unknown: no evidence for log B 'Beta2026' in the CT proof"}},
		{name: "the cloud could not reach the log",
			scts: raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now), ctinclusion.Evidence{SCTHash: w.sb.Hash(), LogID: w.sb.LogID,
				Status: ctinclusion.LookupFailed, Message: "GET https://b-beta2026.log.test/checkpoint: connection refused"}),
			want: pkie.Unknown, wantWords: []string{"inclusion unknown: log B 'Beta2026' unreachable via the cloud: GET https://b-beta2026.log.test/checkpoint: connection refused"}},
		{name: "a surplus SCT's log unreachable: the included ones meet the policy",
			list: w.listABC, scts: raws(w.sa, w.sb, w.sc),
			proof: proofOf(t, w.a.included(t, w.sa, now), w.b.included(t, w.sb, now), ctinclusion.Evidence{SCTHash: w.sc.Hash(), LogID: w.sc.LogID,
				Status: ctinclusion.LookupFailed, Message: "connection refused"}),
			want: pkie.Pass, wantWords: []string{"Chrome CT policy met by 2 SCTs (A 'Alpha2026', B 'Beta2026')", "both included",
				"(not needed: log C 'Gamma2026' unreachable via the cloud: connection refused)"}},
		{name: "two of three logs unreachable: what is shown does not meet the policy",
			list: w.listABC, scts: raws(w.sa, w.sb, w.sc),
			proof: proofOf(t, w.a.included(t, w.sa, now), ctinclusion.Evidence{SCTHash: w.sb.Hash(), LogID: w.sb.LogID,
				Status: ctinclusion.LookupFailed, Message: "timeout"}, ctinclusion.Evidence{SCTHash: w.sc.Hash(), LogID: w.sc.LogID,
				Status: ctinclusion.LookupFailed, Message: "connection refused"}),
			want: pkie.Unknown, wantWords: []string{"Chrome CT policy met by 3 SCTs", "inclusion unknown: log B 'Beta2026' unreachable via the cloud: timeout",
				"log C 'Gamma2026' unreachable"}},
		{name: "the cloud's message is shown without control characters, quotes kept",
			scts: raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now), ctinclusion.Evidence{SCTHash: w.sb.Hash(), LogID: w.sb.LogID,
				Status: ctinclusion.LookupFailed, Message: "Get \"https://b.log.test/checkpoint\": \x1b[2Jrefused\r\n"}),
			want: pkie.Unknown, wantWords: []string{`unreachable via the cloud: Get "https://b.log.test/checkpoint": [2Jrefused`}},
		{name: "a checkpoint signed after the merge deadline without the entry",
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, late), w.b.notYet(t, w.sb, late.Add(-time.Minute))),
			now:   late,
			want:  pkie.Fail, wantWords: []string{"log B 'Beta2026' signed a checkpoint of 5 entries at", "after the SCT's merge deadline, without the certificate at leaf_index 5"}},
		{name: "inclusion optional does not excuse signed evidence against",
			cfg:   VerifierConfig{Inclusion: InclusionOptional},
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, late), w.b.notYet(t, w.sb, late.Add(-time.Minute))),
			now:   late,
			want:  pkie.Fail, wantWords: []string{"after the SCT's merge deadline"}},
		{name: "a checkpoint from before the deadline, read after it",
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now), w.b.notYet(t, w.sb, now)),
			now:   late,
			want:  pkie.Unknown, wantWords: []string{"does not show the SCT, and its merge deadline passed"}},
		{name: "another entry at the SCT's leaf_index",
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now), w.b.conflict(t, w.sb, now)),
			want:  pkie.Fail, wantWords: []string{"log B 'Beta2026' signed a tree of 10 entries that holds another entry at the SCT's leaf_index 5"}},
		{name: "evidence signed by another key proves nothing",
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now), withCheckpoint(w.b.included(t, w.sb, now), w.c.checkpoint(t, 9, now, nil))),
			want:  pkie.Unknown, wantWords: []string{"evidence for log B 'Beta2026' does not verify"}},
		{name: "evidence about another SCT proves nothing",
			scts:  raws(w.sa, w.sb),
			proof: proofOf(t, w.a.included(t, w.sa, now), aboutSCT(w.b.included(t, w.sbOCSP, now), w.sb)),
			want:  pkie.Unknown, wantWords: []string{"evidence for log B 'Beta2026' is not about its SCT"}},
		{name: "a proof that does not decode leaves inclusion unknown",
			scts:  raws(w.sa, w.sb),
			proof: &pkie.Proof{ID: pkie.CT, Version: BodyVersion, Body: []byte{3, 0, 1, 0}},
			want:  pkie.Unknown, wantWords: []string{"the CT proof was refused"}},
		{name: "no SCT and no mirror",
			want: pkie.Fail, wantWords: []string{"no SCT (embedded, TLS or OCSP)"}},
		{name: "an unreadable TLS SCT is named",
			scts: [][]byte{{0, 1, 2}},
			want: pkie.Fail, wantWords: []string{"no SCT (embedded, TLS or OCSP)", "unreadable SCTs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.LogList = w.list
			if tc.list != "" {
				c.LogList = tc.list
			}
			v, err := NewVerifierFrom(c)
			if err != nil {
				t.Fatal(err)
			}
			at := tc.now
			if at.IsZero() {
				at = now
			}
			a := v.Verify(context.Background(), &pkie.VerifyRequest{Now: at, Proof: tc.proof,
				Subject: pkie.Subject{ServerName: "site.ct.test", Port: 443, Chain: w.leaf.Chain, Certs: []*x509.Certificate{w.leaf.Cert},
					SCTs: tc.scts, OCSPResponse: tc.ocsp}})
			if a.Status != tc.want {
				t.Fatalf("%s: %s, want %s", a.Status, a.Reason, tc.want)
			}
			for _, word := range tc.wantWords {
				if !strings.Contains(a.Reason, word) {
					t.Errorf("reason %q does not say %q", a.Reason, word)
				}
			}
			if strings.Contains(a.Reason, "\n") {
				t.Errorf("reason %q is more than one line", a.Reason)
			}
		})
	}
}

func withCheckpoint(e ctinclusion.Evidence, cp []byte) ctinclusion.Evidence {
	e.Checkpoint = cp
	return e
}

// aboutSCT relabels e as evidence about s: the relay's word, which the
// leaf hash it proves does not back.
func aboutSCT(e ctinclusion.Evidence, s *sct.SCT) ctinclusion.Evidence {
	e.SCTHash = s.Hash()
	return e
}

// TestVerifyEmbedded: real certificates with embedded SCTs from real logs,
// the precertificate entry rebuilt with the issuer from the verified chain
// or, failing that, the chain as sent; without an issuer, or with the
// wrong one, the SCTs do not verify.
func TestVerifyEmbedded(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := pem.Decode(b); p != nil {
			return p.Bytes
		}
		return b
	}
	cert := func(name string) *x509.Certificate {
		c, err := x509.ParseCertificate(read(name))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	key := func(name string) crypto.PublicKey {
		k, err := x509.ParsePKIXPublicKey(read(name))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	logEntry := func(operator, desc, url string, pub crypto.PublicKey) *loglist.Log {
		spki, _ := x509.MarshalPKIXPublicKey(pub)
		return &loglist.Log{ID: sha256.Sum256(spki), Key: pub, SPKI: spki, Description: desc, Operator: operator,
			Kind: loglist.RFC6962, URL: url, MMD: 24 * time.Hour, State: loglist.Usable, StateSince: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}
	}
	google := writeList(t,
		logEntry("Google", "Google 'Xenon2025h2'", "https://ct.googleapis.com/logs/eu1/xenon2025h2/", key("google2025/log0-pubkey.bin")),
		logEntry("DigiCert", "DigiCert 'Yeti2025'", "https://yeti2025.ct.digicert.com/log/", key("google2025/log1-pubkey.bin")))
	ctcpp := writeList(t, logEntry("Certificate Transparency", "CT test log", "https://ct.example.com/", key("ctcpp/ct-server-key-public.pem")))
	gLeaf, gIssuer := cert("google2025/leaf_google-cert.bin"), cert("google2025/issuer_google-cert.bin")
	root := cert("ctcpp/ca-cert.pem")
	gNow := time.Date(2025, 8, 1, 0, 0, 0, 0, time.UTC)
	cNow := time.Now()
	for _, tc := range []struct {
		name      string
		list      string
		policy    string
		certs     []*x509.Certificate
		verified  [][]*x509.Certificate
		now       time.Time
		want      pkie.Status
		wantWords []string
	}{
		{"google.com, Chrome, issuer sent", google, "chrome", []*x509.Certificate{gLeaf, gIssuer}, nil, gNow,
			pkie.Pass, []string{"Chrome CT policy met by 2 SCTs (Google 'Xenon2025h2', DigiCert 'Yeti2025')", "inclusion unknown"}},
		{"google.com, Chrome, issuer from the verified chain", google, "chrome", []*x509.Certificate{gLeaf}, [][]*x509.Certificate{{gLeaf, gIssuer}}, gNow,
			pkie.Pass, []string{"Chrome CT policy met by 2 SCTs"}},
		{"google.com, Apple", google, "apple", []*x509.Certificate{gLeaf, gIssuer}, nil, gNow,
			pkie.Pass, []string{"Apple CT policy met by 2 SCTs"}},
		{"google.com without its issuer: missing data is no evidence", google, "chrome", []*x509.Certificate{gLeaf}, nil, gNow,
			pkie.Unknown, []string{"no issuer came with the chain", "Chrome CT policy not met"}},
		{"google.com with the wrong issuer", google, "chrome", []*x509.Certificate{gLeaf, root}, nil, gNow,
			pkie.Fail, []string{"Chrome CT policy not met", "invalid signature"}},
		{"CT's reference leaf", ctcpp, "one", []*x509.Certificate{cert("ctcpp/test-embedded-cert.pem"), root}, nil, cNow,
			pkie.Pass, []string{"one-SCT policy met by 1 SCT (CT test log)"}},
		{"precertificate from a Precertificate Signing Certificate", ctcpp, "one", []*x509.Certificate{cert("ctcpp/test-embedded-with-preca-cert.pem"), root}, nil, cNow,
			pkie.Pass, []string{"one-SCT policy met by 1 SCT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewVerifierFrom(VerifierConfig{LogList: tc.list, Policy: tc.policy, Inclusion: InclusionOptional})
			if err != nil {
				t.Fatal(err)
			}
			chain := make([][]byte, len(tc.certs))
			for i, c := range tc.certs {
				chain[i] = c.Raw
			}
			a := v.Verify(context.Background(), &pkie.VerifyRequest{Now: tc.now, VerifiedChains: tc.verified,
				Subject: pkie.Subject{ServerName: "www.google.com", Port: 443, Chain: chain, Certs: tc.certs}})
			if a.Status != tc.want {
				t.Fatalf("%s: %s, want %s", a.Status, a.Reason, tc.want)
			}
			for _, word := range tc.wantWords {
				if !strings.Contains(a.Reason, word) {
					t.Errorf("reason %q does not say %q", a.Reason, word)
				}
			}
		})
	}
}

// TestRequestParams: the ct request carries the TLS and OCSP SCTs as one
// SCT list, in order, without duplicates or junk, within pkie.MaxParams;
// nothing when the handshake delivered none.
func TestRequestParams(t *testing.T) {
	w := newWorld(t)
	subj := func(scts [][]byte, ocsp []byte) *pkie.Subject {
		return &pkie.Subject{Chain: w.leaf.Chain, Certs: []*x509.Certificate{w.leaf.Cert}, SCTs: scts, OCSPResponse: ocsp}
	}
	list := func(ss ...*sct.SCT) []byte {
		b, err := sct.MarshalList(raws(ss...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	many := make([][]byte, 40)
	for i := range many {
		many[i] = w.a.sctFor(t, w.leaf.Cert, w.now, sct.TLSExtension).Raw
	}
	for _, tc := range []struct {
		name string
		s    *pkie.Subject
		want []byte
	}{
		{"none", subj(nil, nil), nil},
		{"TLS", subj(raws(w.sa, w.sb), nil), list(w.sa, w.sb)},
		{"TLS and OCSP", subj(raws(w.sa), ocspWith(t, w.ca, w.leaf.Cert, w.sbOCSP)), list(w.sa, w.sbOCSP)},
		{"duplicates and junk dropped", subj([][]byte{w.sa.Raw, {1, 2, 3}, w.sa.Raw, w.sb.Raw}, []byte("not OCSP")), list(w.sa, w.sb)},
	} {
		if got := RequestParams(tc.s); string(got) != string(tc.want) {
			t.Errorf("%s: %x, want %x", tc.name, got, tc.want)
		}
	}
	got := RequestParams(subj(many, nil))
	scts, err := sct.ParseList(got, sct.TLSExtension)
	if err != nil || len(got) > pkie.MaxParams || len(scts) == 0 || len(scts) > MaxInclusions {
		t.Errorf("40 SCTs: %d bytes, %d SCTs, %v; want at most %d bytes and %d SCTs", len(got), len(scts), err, pkie.MaxParams, MaxInclusions)
	}
}

// FuzzVerify: whatever body a cloud relays for a certificate with SCTs,
// the verifier answers with one line and never passes on evidence that
// does not verify: with inclusion required, a pass needs both SCTs
// included or promised by evidence signed with the listed keys, which a
// fuzzer cannot forge.
func FuzzVerify(f *testing.F) {
	w := newWorld(f)
	v, err := NewVerifierFrom(VerifierConfig{LogList: w.list})
	if err != nil {
		f.Fatal(err)
	}
	good := proofOf(f, w.a.included(f, w.sa, w.now), w.b.included(f, w.sb, w.now))
	seeds := []*pkie.Proof{good,
		proofOf(f, w.a.included(f, w.sa, w.now), w.b.notYet(f, w.sb, w.now)),
		proofOf(f, w.a.conflict(f, w.sa, w.now))}
	// The evidence of inclusion the test signed: a pass on any other
	// would be a forgery.
	goodEvs := map[string]bool{}
	for _, p := range seeds {
		f.Add(p.Body)
		var b Body
		if err := b.UnmarshalBinary(p.Body); err != nil {
			f.Fatal(err)
		}
		for _, e := range b.Inclusions {
			enc, _ := e.MarshalBinary()
			goodEvs[string(enc)] = true
		}
	}
	f.Add([]byte{3, 0, 0})
	req := func(body []byte) *pkie.VerifyRequest {
		return &pkie.VerifyRequest{Now: w.now, Proof: &pkie.Proof{ID: pkie.CT, Version: BodyVersion, Body: body},
			Subject: pkie.Subject{Chain: w.leaf.Chain, Certs: []*x509.Certificate{w.leaf.Cert}, SCTs: raws(w.sa, w.sb)}}
	}
	if a := v.Verify(context.Background(), req(good.Body)); a.Status != pkie.Pass {
		f.Fatalf("the seed does not pass: %s", a.Reason)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a := v.Verify(context.Background(), req(body))
		if a.Reason == "" || strings.Contains(a.Reason, "\n") {
			t.Fatalf("reason %q", a.Reason)
		}
		if a.Status != pkie.Pass {
			return
		}
		var b Body
		if err := b.UnmarshalBinary(body); err != nil {
			t.Fatalf("passed on a body that does not decode: %s", a.Reason)
		}
		for _, e := range b.Inclusions {
			enc, _ := e.MarshalBinary()
			if !goodEvs[string(enc)] && e.Status == ctinclusion.Included {
				// Another encoding of inclusion that verifies would
				// be a second path to the same root: impossible.
				t.Fatalf("passed on evidence the seed did not hold: %+v", e)
			}
		}
	})
}

// BenchmarkVerify is the client's cost per connection: two TLS SCTs under
// the Chrome policy with their inclusion evidence, warm (SCTs and
// checkpoints verified before, as a client that sees the site again) and
// cold (a fresh verifier each time), beside the same-run ceiling of one
// bare ECDSA P-256 verification.
func BenchmarkVerify(b *testing.B) {
	w := newWorld(b)
	proof := proofOf(b, w.a.included(b, w.sa, w.now), w.b.included(b, w.sb, w.now))
	req := &pkie.VerifyRequest{Now: w.now, Proof: proof,
		Subject: pkie.Subject{Chain: w.leaf.Chain, Certs: []*x509.Certificate{w.leaf.Cert}, SCTs: raws(w.sa, w.sb)}}
	ctx := context.Background()
	b.Run("warm", func(b *testing.B) {
		v, err := NewVerifierFrom(VerifierConfig{LogList: w.list})
		if err != nil {
			b.Fatal(err)
		}
		if a := v.Verify(ctx, req); a.Status != pkie.Pass {
			b.Fatal(a.Reason)
		}
		for b.Loop() {
			v.Verify(ctx, req)
		}
	})
	b.Run("cold", func(b *testing.B) {
		l, err := loglist.Load(ctx, nil, w.list, loglist.LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			v, err := NewVerifierFrom(VerifierConfig{List: l})
			if err != nil {
				b.Fatal(err)
			}
			if a := v.Verify(ctx, req); a.Status != pkie.Pass {
				b.Fatal(a.Reason)
			}
		}
	})
	b.Run("ceiling-one-ecdsa-p256-verify", func(b *testing.B) {
		d := sha256.Sum256([]byte("ceiling"))
		sig, _ := ecdsa.SignASN1(rand.Reader, w.a.key, d[:])
		for b.Loop() {
			if !ecdsa.VerifyASN1(&w.a.key.PublicKey, d[:], sig) {
				b.Fatal("does not verify")
			}
		}
	})
}

// TestVerifyFetch: with fetch, a client with no proof from a cloud asks a
// real log (pkie's own, internal/ctlog, on loopback) for the inclusion of
// an SCT it got from that log, and passes once the log's checkpoint holds
// it; without fetch the same SCT leaves inclusion unknown.
func TestVerifyFetch(t *testing.T) {
	ctx := context.Background()
	ca := newCA(t)
	leaf := ca.issue(t, "fetch.ct.test")
	const origin = "fetch.ct.test/log"
	dir := t.TempDir()
	if _, err := ctlog.Init(ctx, dir, origin, ctlog.InitOptions{Roots: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})}); err != nil {
		t.Fatal(err)
	}
	lg, err := ctlog.Open(ctx, dir, ctlog.Options{BatchMaxAge: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(lg.Handler(ctlog.HandlerOptions{}))
	t.Cleanup(func() {
		srv.Close()
		if err := lg.Close(); err != nil {
			t.Errorf("closing the log: %v", err)
		}
	})
	spki, err := x509.MarshalPKIXPublicKey(lg.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	lc, err := client.New(srv.URL, srv.Client(), jsonclient.Options{PublicKeyDER: spki})
	if err != nil {
		t.Fatal(err)
	}
	got, err := lc.AddChain(ctx, []ctgo.ASN1Cert{{Data: leaf.Chain[0]}, {Data: leaf.Chain[1]}})
	if err != nil {
		t.Fatalf("add-chain: %v", err)
	}
	raw, err := cttls.Marshal(*got)
	if err != nil {
		t.Fatal(err)
	}
	list := writeList(t, &loglist.Log{ID: sha256.Sum256(spki), Key: lg.PublicKey(), SPKI: spki, Description: "pkie 'Fetch2026'", Operator: "pkie",
		Kind: loglist.Static, URL: "https://" + origin + "/", MonitoringURL: srv.URL + "/", MMD: 24 * time.Hour,
		State: loglist.Usable, StateSince: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	req := &pkie.VerifyRequest{Subject: pkie.Subject{ServerName: "fetch.ct.test", Port: 443, Chain: leaf.Chain,
		Certs: []*x509.Certificate{leaf.Cert}, SCTs: [][]byte{raw}}}

	offline, err := NewVerifierFrom(VerifierConfig{LogList: list, Policy: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if a := offline.Verify(ctx, req); a.Status != pkie.Unknown || !strings.Contains(a.Reason, "no evidence for log pkie 'Fetch2026' (no CT proof)") {
		t.Fatalf("without fetch: %s: %s", a.Status, a.Reason)
	}
	v, err := NewVerifierFrom(VerifierConfig{LogList: list, Policy: "one", Fetch: true, HTTP: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	// The log sequences within milliseconds; until its checkpoint holds
	// the entry the SCT is a promise.
	var a pkie.Assertion
	for range 200 {
		if a = v.Verify(ctx, req); a.Status != pkie.Pass || !strings.Contains(a.Reason, "promise") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a.Status != pkie.Pass || !strings.Contains(a.Reason, "one-SCT policy met by 1 SCT (pkie 'Fetch2026'), included (checkpoint of 1 entry)") {
		t.Fatalf("with fetch: %s: %s", a.Status, a.Reason)
	}
}
