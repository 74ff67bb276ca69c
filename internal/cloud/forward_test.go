package cloud

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// TestSealedSubmission: a submission sealed to the cloud's HPKE key, on a
// session that never registers (a forwarder's), is proved and each outcome
// comes back on that session sealed to the connection's key under the
// identifier; an envelope that does not open, one moved to another
// identifier, and any sealed submission to a cloud without an HPKE key
// are refused with EphIDReject(invalid).
func TestSealedSubmission(t *testing.T) {
	priv, err := hpke.DHKEM(ecdh.X25519()).GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ct, rev := newSigner(pkie.CT), newSigner(pkie.Revocation)
	tc := startCloud(t, Config{Provers: []pkie.Prover{ct, rev}, HPKEKey: priv})
	key := bytes.Repeat([]byte{3}, 32)
	eph := bytes.Repeat([]byte{9}, 41)
	chain := testChain(t, "site.test")
	sub := &pecwire.Submit{Budget: 5 * time.Second, ServerName: "Site.Test", Port: 443,
		Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Revocation, Params: []byte{1}}}, Chain: chain}
	k := pecwire.NewHPKEKey(HPKEKeyID, priv)
	env, err := pecwire.SealEnvelope(k, eph, key, sub)
	if err != nil {
		t.Fatal(err)
	}
	c := tc.dial(t, pecwire.TCP)
	send(t, c, &pecwire.SealedSubmit{EphID: eph, Envelope: env})
	subject := &pkie.Subject{ServerName: "site.test", Port: 443, Chain: chain}
	got := map[pkie.ID]bool{}
	for range 2 {
		m := recvAs[*pecwire.SealedProof](t, c)
		if !bytes.Equal(m.EphID, eph) {
			t.Fatalf("sealed proof under %x", m.EphID)
		}
		p, err := pecwire.OpenProof(key, eph, m.Sealed)
		if err != nil || p.Status != pecwire.ProofOK {
			t.Fatalf("%+v, %v", p, err)
		}
		s, params := ct, []byte(nil)
		if p.ID == pkie.Revocation {
			s, params = rev, []byte{1}
		}
		if err := s.verify(subject, params, p.Proof); err != nil {
			t.Fatalf("%s: %v", p.ID, err)
		}
		got[p.ID] = true
	}
	if !got[pkie.CT] || !got[pkie.Revocation] {
		t.Fatalf("outcomes %v", got)
	}
	other := bytes.Repeat([]byte{8}, 41)
	tampered := bytes.Clone(env)
	tampered[len(tampered)-1] ^= 1
	for name, m := range map[string]*pecwire.SealedSubmit{
		"tampered":    {EphID: eph, Envelope: tampered},
		"other EphID": {EphID: other, Envelope: env},
		"not HPKE":    {EphID: eph, Envelope: []byte("site.test in the clear")},
	} {
		send(t, c, m)
		r := recvAs[*pecwire.EphIDReject](t, c)
		if r.Code != pecwire.RejectInvalid || !bytes.Equal(r.EphID, m.EphID) {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if n := ct.calls.Load(); n != 1 {
		t.Errorf("ct prover called %d times, want 1", n)
	}

	plain := startCloud(t, Config{Provers: []pkie.Prover{newSigner(pkie.CT)}})
	c2 := plain.dial(t, pecwire.TCP)
	send(t, c2, &pecwire.SealedSubmit{EphID: eph, Envelope: env})
	if r := recvAs[*pecwire.EphIDReject](t, c2); r.Code != pecwire.RejectInvalid {
		t.Errorf("cloud without a key: %+v", r)
	}
}

// TestHPKEKeyFile: init writes hpke.key 0600; a data directory without
// one loads with none; a second key is refused; a key readable by others
// is refused.
func TestHPKEKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cloud")
	d, err := Init(dir, FileConfig{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, FileHPKE))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi, err)
	}
	k, err := d.LoadHPKE()
	if err != nil || k == nil {
		t.Fatalf("%v %v", k, err)
	}
	if _, err := NewHPKEKey(dir); err == nil {
		t.Fatal("a second key overwrote the first")
	}
	os.Chmod(filepath.Join(dir, FileHPKE), 0o644)
	if _, err := d.LoadHPKE(); err == nil {
		t.Fatal("loaded a key readable by others")
	}
	os.Remove(filepath.Join(dir, FileHPKE))
	if k, err := d.LoadHPKE(); err != nil || k != nil {
		t.Fatalf("no key file: %v %v", k, err)
	}
	if _, err := NewHPKEKey(dir); err != nil {
		t.Fatal(err)
	}
}

// TestServerSealedUnlisted: a PEC server's submission naming a forwarder
// the operator did not list is refused at once, and nothing is proved or
// dialled: a client cannot aim the cloud at an address of its choice.
func TestServerSealedUnlisted(t *testing.T) {
	ct := newSigner(pkie.CT)
	tc := startCloud(t, Config{Provers: []pkie.Prover{ct}})
	c := tc.dial(t, pecwire.TCP)
	eph := bytes.Repeat([]byte{9}, 41)
	send(t, c, &pecwire.ServerSealed{EphID: eph, Key: [32]byte{1}, Forwarder: "tcp://127.0.0.1:9",
		Submit: pecwire.Submit{Budget: time.Second, ServerName: "site.test", Port: 443,
			Requests: []pkie.Request{{ID: pkie.CT}}, Chain: testChain(t, "site.test")}})
	r := recvAs[*pecwire.EphIDReject](t, c)
	if r.Code != pecwire.RejectInvalid || !bytes.Equal(r.EphID, eph) {
		t.Fatalf("%+v", r)
	}
	if n := ct.calls.Load(); n != 0 {
		t.Fatalf("prover called %d times", n)
	}
}
