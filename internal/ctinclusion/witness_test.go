package ctinclusion

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// testWitness is a witness's key pair, made in the test.
type testWitness struct {
	name   string
	vkey   string // the plain Ed25519 note key, as a witness publishes it
	cosig  string // the same key in the cosignature/v1 form
	signer *fnote.Signer
}

func newTestWitness(t testing.TB, name string) *testWitness {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		t.Fatal(err)
	}
	cosig, err := fnote.VKeyToCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return &testWitness{name: name, vkey: vkey, cosig: cosig, signer: s}
}

// cosignature returns the signature line w adds to a checkpoint whose
// note text is text, as a witness does (C2SP tlog-witness): a
// cosignature/v1 signature of the text, made by formats/note's signer,
// under w's name and key hash. tamper flips a bit of the signature.
func (w *testWitness) cosignature(t testing.TB, text string, tamper bool) string {
	t.Helper()
	sig, err := w.signer.Sign([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if tamper {
		sig[len(sig)-1] ^= 1
	}
	b := binary.BigEndian.AppendUint32(nil, w.signer.KeyHash())
	b = append(b, sig...)
	return fmt.Sprintf("— %s %s\n", w.name, base64.StdEncoding.EncodeToString(b))
}

// noteText returns the text a checkpoint's signatures cover.
func noteText(t testing.TB, cp []byte) string {
	t.Helper()
	i := strings.Index(string(cp), "\n\n")
	if i < 0 {
		t.Fatalf("checkpoint %q has no signature block", cp)
	}
	return string(cp[:i+1])
}

// cosigned is e with lines appended to its checkpoint, as a log that
// serves its witnesses' cosignatures serves it.
func cosigned(e *Evidence, lines ...string) *Evidence {
	c := *e
	c.Checkpoint = append([]byte(nil), e.Checkpoint...)
	for _, l := range lines {
		c.Checkpoint = append(c.Checkpoint, l...)
	}
	return &c
}

func mustWitnesses(t testing.TB, quorum int, keys ...string) *Witnesses {
	t.Helper()
	w, err := NewWitnesses(keys, quorum)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWitnesses takes a real checkpoint of pkie's own log (internal/ctlog
// on loopback), adds cosignatures made with test witness keys, and checks
// VerifyWith's witness policy: a quorum met verifies; one short is bad
// evidence that says how many of which witnesses cosigned; a cosignature
// by an unlisted key, under a listed witness's name by another key, over
// another checkpoint, or tampered, does not count; and nothing short of
// the quorum is a MismatchError.
func TestWitnesses(t *testing.T) {
	ctx := context.Background()
	static, rfc := startPKIELog(t, "pkie.witness.test/log")
	a := static.submitCert(ctx, t, "a.witness.test")
	b := static.submitCert(ctx, t, "b.witness.test")
	f := &Fetcher{}
	ev, err := f.Fetch(ctx, static.log, a.sct, a.leafHash)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Status != Included {
		t.Fatalf("evidence of a logged certificate: %v", ev.Status)
	}
	ev = roundTrip(t, ev)
	text := noteText(t, ev.Checkpoint)

	w1, w2, w3 := newTestWitness(t, "witness-one.test"), newTestWitness(t, "witness-two.test"), newTestWitness(t, "witness-three.test")
	stranger := newTestWitness(t, "stranger.test")
	impostor := newTestWitness(t, w2.name) // w2's name, another key
	otherText := strings.Replace(text, "\n", "x\n", 1)
	twoOfThree := mustWitnesses(t, 2, w1.cosig, w2.vkey, w3.cosig)

	// Conflict evidence: a's audit path, presented as evidence that b's
	// entry is not at a's index.
	conflict := *ev
	conflict.Status, conflict.Leaf = Conflict, a.leafHash

	for _, tc := range []struct {
		name      string
		e         *Evidence
		leaf      [32]byte
		w         *Witnesses
		cosigners int      // when it verifies
		wantErr   []string // when it does not: words of the QuorumError
	}{
		{name: "no witness policy, no cosignatures", e: ev},
		{name: "2 of 3 cosigned", e: cosigned(ev, w1.cosignature(t, text, false), w2.cosignature(t, text, false)), w: twoOfThree, cosigners: 2},
		{name: "3 of 3 cosigned, quorum 2", e: cosigned(ev, w3.cosignature(t, text, false), w1.cosignature(t, text, false), w2.cosignature(t, text, false)),
			w: twoOfThree, cosigners: 2},
		{name: "all required and given", e: cosigned(ev, w1.cosignature(t, text, false), w2.cosignature(t, text, false)),
			w: mustWitnesses(t, 0, w1.vkey, w2.cosig), cosigners: 2},
		{name: "one short", e: cosigned(ev, w1.cosignature(t, text, false)), w: twoOfThree,
			wantErr: []string{"cosigned by 1 of the 3 witnesses listed, short of the quorum of 2", "(cosigned by witness-one.test; not by witness-two.test, witness-three.test)"}},
		{name: "none", e: ev, w: twoOfThree,
			wantErr: []string{"cosigned by 0 of the 3 witnesses listed", "not by witness-one.test, witness-two.test, witness-three.test"}},
		{name: "an unlisted witness does not count", e: cosigned(ev, w1.cosignature(t, text, false), stranger.cosignature(t, text, false)), w: twoOfThree,
			wantErr: []string{"cosigned by 1 of the 3"}},
		{name: "a listed name with another key does not count", e: cosigned(ev, w1.cosignature(t, text, false), impostor.cosignature(t, text, false)), w: twoOfThree,
			wantErr: []string{"cosigned by 1 of the 3", "not by witness-two.test"}},
		{name: "a tampered cosignature does not count", e: cosigned(ev, w1.cosignature(t, text, false), w2.cosignature(t, text, true)), w: twoOfThree,
			wantErr: []string{"cosigned by 1 of the 3", "the cosignature of witness-two.test does not verify"}},
		{name: "a tampered cosignature does not hide the others", e: cosigned(ev, w2.cosignature(t, text, true), w1.cosignature(t, text, false), w3.cosignature(t, text, false)),
			w: twoOfThree, cosigners: 2},
		{name: "a cosignature of another checkpoint does not count", e: cosigned(ev, w1.cosignature(t, text, false), w2.cosignature(t, otherText, false)), w: twoOfThree,
			wantErr: []string{"cosigned by 1 of the 3", "witness-two.test does not verify"}},
		{name: "the same witness twice counts once", e: cosigned(ev, w1.cosignature(t, text, false), w1.cosignature(t, text, false)), w: twoOfThree,
			wantErr: []string{"cosigned by 1 of the 3"}},
		{name: "signed evidence against, short of the quorum, is not a mismatch", e: cosigned(&conflict, w1.cosignature(t, text, false)), leaf: b.leafHash, w: twoOfThree,
			wantErr: []string{"short of the quorum of 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf := a.leafHash
			if tc.leaf != ([32]byte{}) {
				leaf = tc.leaf
			}
			e := roundTrip(t, tc.e)
			for _, v := range []*Verifier{nil, NewVerifier(4)} {
				for range 2 { // cold, then from the cache
					r, err := v.VerifyWith(e, static.log, leaf, VerifyOptions{Witnesses: tc.w})
					if tc.wantErr == nil {
						if err != nil {
							t.Fatalf("VerifyWith: %v", err)
						}
						if r.Status != tc.e.Status || r.Cosigners != tc.cosigners {
							t.Errorf("%v with %d cosigners, want %v with %d", r.Status, r.Cosigners, tc.e.Status, tc.cosigners)
						}
						continue
					}
					q, ok := errors.AsType[*QuorumError](err)
					if !ok || !errors.Is(err, ErrBadEvidence) {
						t.Fatalf("VerifyWith: %v (%T), want a QuorumError, which is bad evidence", err, err)
					}
					if _, mm := errors.AsType[*MismatchError](err); mm {
						t.Errorf("a checkpoint short of the quorum is a MismatchError: %v", err)
					}
					for _, word := range tc.wantErr {
						if !strings.Contains(err.Error(), word) {
							t.Errorf("%q does not say %q", err, word)
						}
					}
					if q.Quorum != tc.w.Quorum() || q.Listed != tc.w.Len() {
						t.Errorf("QuorumError of quorum %d of %d, policy %s", q.Quorum, q.Listed, tc.w)
					}
				}
			}
		})
	}

	// Without a witness policy the conflict is signed evidence against.
	if _, err := Verify(&conflict, static.log, b.leafHash); !errors.As(err, new(*MismatchError)) {
		t.Errorf("conflict without witnesses: %v, want a MismatchError", err)
	}

	// An RFC 6962 STH cannot carry cosignatures: with witnesses, its
	// evidence is bad evidence, saying so.
	// (A Fetcher of its own: the two faces of pkie's log share an ID.)
	sth, err := (&Fetcher{}).Fetch(ctx, rfc.log, a.sct, a.leafHash)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(sth, rfc.log, a.leafHash); err != nil {
		t.Fatalf("RFC 6962 evidence without witnesses: %v", err)
	}
	if _, err := VerifyWith(sth, rfc.log, a.leafHash, VerifyOptions{Witnesses: twoOfThree}); !errors.Is(err, ErrBadEvidence) ||
		!strings.Contains(err.Error(), "cannot carry witness cosignatures") {
		t.Errorf("RFC 6962 evidence with witnesses: %v, want bad evidence saying STHs cannot be cosigned", err)
	}
}

// TestWitnessesCache: a Verifier's cache of verified tree heads keys on
// the witness policy, so a head verified without witnesses, or under
// another policy, is not taken as witnessed.
func TestWitnessesCache(t *testing.T) {
	ctx := context.Background()
	static, _ := startPKIELog(t, "pkie.witness.test/log")
	a := static.submitCert(ctx, t, "a.witness.test")
	ev, err := (&Fetcher{}).Fetch(ctx, static.log, a.sct, a.leafHash)
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := newTestWitness(t, "witness-one.test"), newTestWitness(t, "witness-two.test")
	e := cosigned(ev, w1.cosignature(t, noteText(t, ev.Checkpoint), false))
	byOne, byTwo := mustWitnesses(t, 1, w1.cosig), mustWitnesses(t, 1, w2.cosig)
	// The same keys in another order and form are the same policy.
	if a, b := mustWitnesses(t, 1, w1.vkey, w2.cosig), mustWitnesses(t, 1, w2.vkey, w1.cosig); a.id != b.id {
		t.Errorf("one policy, two identities")
	}
	if a, b := mustWitnesses(t, 1, w1.vkey, w2.vkey), mustWitnesses(t, 2, w1.vkey, w2.vkey); a.id == b.id {
		t.Errorf("two quorums, one identity")
	}

	v := NewVerifier(8)
	for _, step := range []struct {
		w  *Witnesses
		ok bool
	}{
		{nil, true},    // cached without witnesses
		{byTwo, false}, // not witnessed by w2, cache or not
		{byOne, true},  // cached under w1's policy
		{byTwo, false}, // still not w2's
		{nil, true},
		{byOne, true},
	} {
		_, err := v.VerifyWith(e, static.log, a.leafHash, VerifyOptions{Witnesses: step.w})
		if (err == nil) != step.ok {
			t.Errorf("witnesses %v: %v, want ok=%v", step.w, err, step.ok)
		}
	}
}

// TestNewWitnesses: a witness policy refuses keys and quorums that could
// not mean what the configuration says, naming what is wrong.
func TestNewWitnesses(t *testing.T) {
	w1, w2 := newTestWitness(t, "witness-one.test"), newTestWitness(t, "witness-two.test")
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	logKey, err := fnote.RFC6962VerifierString("log.witness.test", ek.Public())
	if err != nil {
		t.Fatal(err)
	}
	renamed := renameKey(t, w1.vkey, "another-name.test")
	mistyped := w1.name + "+00000000+" + strings.SplitN(w1.vkey, "+", 3)[2]
	many := make([]string, MaxWitnesses+1)
	for i := range many {
		many[i] = newTestWitness(t, fmt.Sprintf("w%d.test", i)).vkey
	}
	for _, tc := range []struct {
		name   string
		keys   []string
		quorum int
		want   string
	}{
		{"none", nil, 0, "at least one witness"},
		{"quorum above the witnesses", []string{w1.vkey, w2.vkey}, 3, "quorum 3: want 1 to 2"},
		{"negative quorum", []string{w1.vkey}, -1, "quorum -1"},
		{"junk", []string{"junk"}, 0, "witness key 1"},
		{"a log's key", []string{w1.vkey, logKey}, 0, "witness key 2 (\"log.witness.test+"},
		{"mistyped hash", []string{mistyped}, 0, "not the key's"},
		{"the same key twice", []string{w1.vkey, w1.cosig}, 0, "witness keys 1 and 2 are the same key"},
		{"the same key under two names", []string{w1.vkey, renamed}, 0, "witness keys 1 and 2 are the same key"},
		{"too many", many, 0, fmt.Sprintf("at most %d", MaxWitnesses)},
	} {
		if _, err := NewWitnesses(tc.keys, tc.quorum); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	w := mustWitnesses(t, 0, w1.vkey, w2.cosig)
	if w.Quorum() != 2 || w.Len() != 2 || w.String() != "2 of 2 witnesses (witness-one.test, witness-two.test)" {
		t.Errorf("quorum 0 means all: %d of %d, %s", w.Quorum(), w.Len(), w)
	}
}

// renameKey returns vkey's Ed25519 key under another name, with the key
// hash that name gives it.
func renameKey(t testing.TB, vkey, name string) string {
	t.Helper()
	key64 := strings.SplitN(vkey, "+", 3)[2]
	key, err := base64.StdEncoding.DecodeString(key64)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewEd25519VerifierKey(name, key[1:])
	if err != nil {
		t.Fatal(err)
	}
	return v
}
