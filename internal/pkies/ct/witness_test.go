package ct

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctinclusion"
)

// testWitness is a witness's key pair, made in the test.
type testWitness struct {
	name   string
	vkey   string // cosignature/v1 form
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
	if vkey, err = fnote.VKeyToCosignatureV1(vkey); err != nil {
		t.Fatal(err)
	}
	return &testWitness{name: name, vkey: vkey, signer: s}
}

// cosign returns e with a cosignature/v1 line of each witness appended to
// its checkpoint, as a log serves its witnesses' cosignatures. A witness
// named in tamper signs, but one bit of its signature is flipped.
func cosign(t testing.TB, e ctinclusion.Evidence, tamper *testWitness, ws ...*testWitness) ctinclusion.Evidence {
	t.Helper()
	i := strings.Index(string(e.Checkpoint), "\n\n")
	if i < 0 {
		t.Fatalf("checkpoint %q has no signature block", e.Checkpoint)
	}
	text := e.Checkpoint[:i+1]
	cp := append([]byte(nil), e.Checkpoint...)
	for _, w := range ws {
		sig, err := w.signer.Sign(text)
		if err != nil {
			t.Fatal(err)
		}
		if w == tamper {
			sig[len(sig)-1] ^= 1
		}
		b := append(binary.BigEndian.AppendUint32(nil, w.signer.KeyHash()), sig...)
		cp = fmt.Appendf(cp, "— %s %s\n", w.name, base64.StdEncoding.EncodeToString(b))
	}
	e.Checkpoint = cp
	return e
}

// TestVerifyWitnesses: a verifier that requires witnesses passes a
// certificate whose inclusion evidence comes under checkpoints a quorum of
// them cosigned, and leaves it unknown, never failed, when a checkpoint is
// short of the quorum: the reason names the log and the quorum. Signed
// evidence against an SCT fails only under a witnessed checkpoint.
func TestVerifyWitnesses(t *testing.T) {
	w := newWorld(t)
	now := w.now
	w1, w2, w3 := newTestWitness(t, "witness-one.test"), newTestWitness(t, "witness-two.test"), newTestWitness(t, "witness-three.test")
	keys := []string{w1.vkey, w2.vkey, w3.vkey}
	twoOfThree := VerifierConfig{Witnesses: keys, WitnessQuorum: 2}
	inA, inB := w.a.included(t, w.sa, now), w.b.included(t, w.sb, now)
	for _, tc := range []struct {
		name      string
		cfg       VerifierConfig
		proof     *pkie.Proof
		want      pkie.Status
		wantWords []string
	}{
		{name: "both checkpoints cosigned by a quorum",
			cfg:   twoOfThree,
			proof: proofOf(t, cosign(t, inA, nil, w1, w2), cosign(t, inB, nil, w3, w2, w1)),
			want:  pkie.Pass, wantWords: []string{"Chrome CT policy met by 2 SCTs", "both included (checkpoints of 9 and 10 entries)",
				"witnessed (each checkpoint cosigned by a quorum of 2 of the 3 witnesses listed)"}},
		{name: "all witnesses by default",
			cfg:   VerifierConfig{Witnesses: keys},
			proof: proofOf(t, cosign(t, inA, nil, w1, w2, w3), cosign(t, inB, nil, w1, w2)),
			want:  pkie.Unknown, wantWords: []string{"the checkpoint of log B 'Beta2026' is cosigned by 2 of the 3 witnesses listed, short of the witness quorum of 3"}},
		{name: "no cosignatures",
			cfg:   twoOfThree,
			proof: proofOf(t, inA, inB),
			want:  pkie.Unknown, wantWords: []string{"but inclusion unknown", "the checkpoint of log A 'Alpha2026' is cosigned by 0 of the 3 witnesses listed, short of the witness quorum of 2",
				"the checkpoint of log B 'Beta2026'"}},
		{name: "one checkpoint one short",
			cfg:   twoOfThree,
			proof: proofOf(t, cosign(t, inA, nil, w1, w2), cosign(t, inB, nil, w3)),
			want:  pkie.Unknown, wantWords: []string{"the checkpoint of log B 'Beta2026' is cosigned by 1 of the 3 witnesses listed, short of the witness quorum of 2 (cosigned by witness-three.test)"}},
		{name: "a tampered cosignature does not count",
			cfg:   twoOfThree,
			proof: proofOf(t, cosign(t, inA, nil, w1, w2), cosign(t, inB, w2, w1, w2)),
			want:  pkie.Unknown, wantWords: []string{"the checkpoint of log B 'Beta2026' is cosigned by 1 of the 3", "the cosignature of witness-two.test does not verify"}},
		{name: "inclusion optional: the policy decides, the reason says the quorum was missed",
			cfg:   VerifierConfig{Witnesses: keys, WitnessQuorum: 2, Inclusion: InclusionOptional},
			proof: proofOf(t, inA, cosign(t, inB, nil, w1, w2)),
			want:  pkie.Pass, wantWords: []string{"1 included (checkpoint of 10 entries), witnessed", "inclusion unknown: the checkpoint of log A 'Alpha2026' is cosigned by 0"}},
		{name: "signed evidence against, not witnessed, is not a failure",
			cfg:   twoOfThree,
			proof: proofOf(t, cosign(t, inA, nil, w1, w2), w.b.conflict(t, w.sb, now)),
			want:  pkie.Unknown, wantWords: []string{"the checkpoint of log B 'Beta2026' is cosigned by 0 of the 3"}},
		{name: "signed evidence against, witnessed, fails",
			cfg:   twoOfThree,
			proof: proofOf(t, cosign(t, inA, nil, w1, w2), cosign(t, w.b.conflict(t, w.sb, now), nil, w1, w2)),
			want:  pkie.Fail, wantWords: []string{"log B 'Beta2026' signed a tree of 10 entries that holds another entry at the SCT's leaf_index 5"}},
		{name: "cosignatures are not needed without witnesses",
			proof: proofOf(t, cosign(t, inA, nil, w1), inB),
			want:  pkie.Pass, wantWords: []string{"both included (checkpoints of 9 and 10 entries)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.LogList = w.list
			v, err := NewVerifier(c.JSON())
			if err != nil {
				t.Fatal(err)
			}
			// Twice: the second verdict comes from the verified-head cache.
			for range 2 {
				a := v.Verify(context.Background(), &pkie.VerifyRequest{Now: now, Proof: tc.proof,
					Subject: pkie.Subject{ServerName: "site.ct.test", Port: 443, Chain: w.leaf.Chain, Certs: []*x509.Certificate{w.leaf.Cert},
						SCTs: raws(w.sa, w.sb)}})
				if a.Status != tc.want {
					t.Fatalf("%s: %s, want %s", a.Status, a.Reason, tc.want)
				}
				for _, word := range tc.wantWords {
					if !strings.Contains(a.Reason, word) {
						t.Errorf("reason %q does not say %q", a.Reason, word)
					}
				}
				if tc.cfg.Witnesses == nil && strings.Contains(a.Reason, "witness") {
					t.Errorf("reason %q speaks of witnesses none required", a.Reason)
				}
			}
		})
	}
}

// TestVerifierConfigWitnesses: witness keys and quorums that cannot mean
// what the configuration says are refused, naming the field.
func TestVerifierConfigWitnesses(t *testing.T) {
	list := writeList(t, newTestLog(t, "Op A", "A 'Alpha2026'").log)
	w1, w2 := newTestWitness(t, "witness-one.test"), newTestWitness(t, "witness-two.test")
	if _, err := NewVerifier(VerifierConfig{LogList: list, Witnesses: []string{w1.vkey, w2.vkey}, WitnessQuorum: 1}.JSON()); err != nil {
		t.Errorf("a valid witness policy: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  VerifierConfig
		want string
	}{
		{"witnesses without a log list", VerifierConfig{Key: "x", LogKey: "y", Witnesses: []string{w1.vkey}}, "witnesses and witness_quorum need log_list"},
		{"quorum without witnesses", VerifierConfig{LogList: list, WitnessQuorum: 1}, "witness_quorum is set but witnesses"},
		{"quorum above the witnesses", VerifierConfig{LogList: list, Witnesses: []string{w1.vkey}, WitnessQuorum: 2}, "witness_quorum 2: want 1 to 1"},
		{"negative quorum", VerifierConfig{LogList: list, Witnesses: []string{w1.vkey}, WitnessQuorum: -1}, "witness_quorum -1"},
		{"a key that is not one", VerifierConfig{LogList: list, Witnesses: []string{w1.vkey, "junk"}}, "witnesses: ctinclusion: witness key 2"},
		{"the same witness twice", VerifierConfig{LogList: list, Witnesses: []string{w1.vkey, w1.vkey}}, "witnesses: ctinclusion: witness keys 1 and 2 are the same key"},
	} {
		_, err := NewVerifier(tc.cfg.JSON())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
