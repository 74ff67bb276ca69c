package ctfollow

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pkie/pkie/internal/ctwire"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// fixture is a log with issuers, served on loopback, and a follower config.
type fixture struct {
	t   *testing.T
	cf  *certFactory
	log *testLog
	srv *logServer
	dir string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	key := newLogKey(t, "ctfollow.test/log")
	l := newTestLog(t, key)
	cf := newCertFactory(t)
	return &fixture{t: t, cf: cf, log: l, srv: newLogServer(t, l, cf.ca), dir: t.TempDir()}
}

func (fx *fixture) grow(n int) [][][]byte {
	fx.t.Helper()
	es, keys, finals := fx.cf.entries(n)
	fx.log.addEntries(es, keys)
	return finals
}

func (fx *fixture) config(kind string) Config {
	return Config{Kind: kind, URL: fx.srv.URL, Key: fx.log.key.vkey, Dir: fx.dir, Parallel: 3}
}

func (fx *fixture) open(kind string) *Follower {
	fx.t.Helper()
	f, err := Open(context.Background(), fx.config(kind))
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(func() { f.Close() })
	return f
}

// checkState checks f's state and keys file against the log at size n.
func (fx *fixture) checkState(f *Follower, n int) {
	fx.t.Helper()
	st := f.State()
	if st.Size != uint64(n) {
		fx.t.Fatalf("state size %d, want %d", st.Size, n)
	}
	want := fx.log.wantKeys(n)
	if st.KeyCount != uint64(len(want)/32) {
		fx.t.Fatalf("state has %d keys, want %d", st.KeyCount, len(want)/32)
	}
	got, err := os.ReadFile(f.KeysPath())
	if err != nil {
		fx.t.Fatal(err)
	}
	if !bytes.Equal(got[:len(want)], want) {
		fx.t.Fatalf("keys file differs from the keys of the log's entries")
	}
}

func TestFollow(t *testing.T) {
	for _, kind := range []string{KindStatic, KindRFC6962} {
		t.Run(kind, func(t *testing.T) {
			fx := newFixture(t)
			f := fx.open(kind)
			// An empty log first: Tessera publishes a checkpoint of size 0.
			if _, err := f.Sync(context.Background(), nil); err != nil {
				t.Fatalf("sync of an empty log: %v", err)
			}
			fx.checkState(f, 0)

			var finals [][][]byte
			total := 0
			for _, n := range []int{300, 1, 211, 300} { // across full and partial tiles
				finals = append(finals, fx.grow(n)...)
				total += n
				var last Progress
				st, err := f.Sync(context.Background(), func(p Progress) { last = p })
				if err != nil {
					t.Fatalf("sync to %d: %v", total, err)
				}
				if st.Size != uint64(total) || last.Done != uint64(n) || last.Total != uint64(n) {
					t.Fatalf("sync to %d: size %d, progress %+v", total, st.Size, last)
				}
				fx.checkState(f, total)
			}
			// Every final certificate of a logged precertificate is found
			// by the key a client computes from its chain.
			keys, _ := os.ReadFile(f.KeysPath())
			for i, chain := range finals {
				k, err := ctwire.ChainKey(chain)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(keys, k[:]) {
					t.Fatalf("final certificate %d: its ChainKey is not in the keys file", i)
				}
			}
			// Nothing new: same state.
			if st, err := f.Sync(context.Background(), nil); err != nil || st.Size != uint64(total) {
				t.Fatalf("sync with no news: %v, %v", st, err)
			}
			// A restart picks up where the follower was.
			before := f.State()
			f.Close()
			f2 := fx.open(kind)
			if st := f2.State(); st.Size != before.Size || !bytes.Equal(st.Root, before.Root) || !bytes.Equal(st.Checkpoint, before.Checkpoint) {
				t.Fatalf("after restart: state %+v, want %+v", st, before)
			}
			fx.grow(5)
			if _, err := f2.Sync(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			fx.checkState(f2, total+5)
		})
	}
}

// TestKeyForms follows with the log's key in each accepted form.
func TestKeyForms(t *testing.T) {
	fx := newFixture(t)
	fx.grow(3)
	spki := fx.log.key.spkiBase64(t)
	pemKey := "-----BEGIN PUBLIC KEY-----\n" + spki + "\n-----END PUBLIC KEY-----\n"
	for _, tc := range []struct {
		name, kind, key, origin string
		ok                      bool
	}{
		{"vkey", KindStatic, fx.log.key.vkey, "", true},
		{"vkey and origin", KindStatic, fx.log.key.vkey, "ctfollow.test/log", true},
		{"vkey, other origin", KindStatic, fx.log.key.vkey, "other.test/log", false},
		{"base64 SPKI and origin", KindStatic, spki, "ctfollow.test/log", true},
		{"PEM and origin", KindStatic, pemKey, "ctfollow.test/log", true},
		{"SPKI without origin", KindStatic, spki, "", false},
		{"RFC 6962 SPKI, origin from the URL", KindRFC6962, spki, "", true},
		{"RFC 6962 PEM, origin from the URL", KindRFC6962, pemKey, "", true},
		{"junk", KindStatic, "not a key", "", false},
		{"RSA vkey", KindStatic, rsaVKey(t, "ctfollow.test/log"), "", false},
		{"RSA SPKI", KindRFC6962, rsaSPKI(t), "", false},
		{"P-384 SPKI", KindStatic, p384SPKI(t), "ctfollow.test/log", false},
		{"empty", KindStatic, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fx.config(tc.kind)
			c.Key, c.Origin, c.Dir = tc.key, tc.origin, t.TempDir()
			f, err := Open(context.Background(), c)
			if !tc.ok {
				if err == nil {
					f.Close()
					t.Fatal("Open accepted the key")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if st, err := f.Sync(context.Background(), nil); err != nil || st.Size != 3 {
				t.Fatalf("Sync: %v, %v", st, err)
			}
		})
	}
}

func TestRestartRefusals(t *testing.T) {
	fx := newFixture(t)
	fx.grow(20)
	f := fx.open(KindStatic)
	if _, err := f.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	statePath := filepath.Join(fx.dir, StateFile)
	good, _ := os.ReadFile(statePath)
	goodKeys, _ := os.ReadFile(filepath.Join(fx.dir, KeysFile))
	otherKey := newLogKey(t, "ctfollow.test/log")

	for _, tc := range []struct {
		name  string
		setup func()
		key   string
	}{
		{"state deleted", func() { os.Remove(statePath) }, ""},
		{"state corrupt", func() { os.WriteFile(statePath, good[:len(good)/2], 0o600) }, ""},
		{"state root altered", func() {
			os.WriteFile(statePath, bytes.Replace(good, []byte(`"root": "`), []byte(`"root": "AA`), 1), 0o600)
		}, ""},
		{"keys truncated", func() { os.WriteFile(filepath.Join(fx.dir, KeysFile), goodKeys[:32], 0o600) }, ""},
		{"keys deleted", func() { os.Remove(filepath.Join(fx.dir, KeysFile)) }, ""},
		{"another key", func() {}, otherKey.vkey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(statePath, good, 0o600)
			os.WriteFile(filepath.Join(fx.dir, KeysFile), goodKeys, 0o600)
			tc.setup()
			c := fx.config(KindStatic)
			if tc.key != "" {
				c.Key = tc.key
			}
			f, err := Open(context.Background(), c)
			var se *StateError
			if !errors.As(err, &se) {
				if f != nil {
					f.Close()
				}
				t.Fatalf("Open = %v, want a StateError", err)
			}
		})
	}

	// Keys past the state's count (a sync that did not finish) are cut.
	os.WriteFile(statePath, good, 0o600)
	os.WriteFile(filepath.Join(fx.dir, KeysFile), append(bytes.Clone(goodKeys), make([]byte, 96)...), 0o600)
	f = fx.open(KindStatic)
	if b, _ := os.ReadFile(f.KeysPath()); !bytes.Equal(b, goodKeys) {
		t.Fatalf("keys file of %d bytes after Open, want %d", len(b), len(goodKeys))
	}
	fx.checkState(f, 20)

	// A second follower on the same directory is refused while the
	// first holds it.
	if f2, err := Open(context.Background(), fx.config(KindStatic)); err == nil {
		f2.Close()
		t.Fatal("two followers opened one state directory")
	}
}

// rsaSPKI and rsaVKey are an RSA log key in each form: refused, as
// formats/note's RFC 6962 verifier accepts bad RSA signatures.
func rsaSPKI(t *testing.T) string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(k.Public())
	return base64.StdEncoding.EncodeToString(der)
}

func rsaVKey(t *testing.T, origin string) string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	v, err := fnote.RFC6962VerifierString(origin, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFormatsRSAVerifier documents why RSA log keys are refused:
// formats/note's RFC 6962 verifier accepts a signature of junk under an RSA
// key. If this test fails, the dependency was fixed and RSA keys may be
// allowed (remove errNotECDSA).
func TestFormatsRSAVerifier(t *testing.T) {
	v, err := fnote.NewRFC6962Verifier(rsaVKey(t, "rsa.test/log"))
	if err != nil {
		t.Fatal(err)
	}
	text := "rsa.test/log\n1\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"
	junk := make([]byte, 8+2+2+256) // timestamp, sha256 + rsa, length, "signature"
	junk[8], junk[9], junk[10], junk[11] = 4, 1, 1, 0
	sig := append(binary.BigEndian.AppendUint32(nil, v.KeyHash()), junk...)
	msg := text + "\n— rsa.test/log " + base64.StdEncoding.EncodeToString(sig) + "\n"
	if _, err := note.Open([]byte(msg), note.VerifierList(v)); err != nil {
		t.Skipf("formats/note now rejects a junk RSA signature (%v): RSA log keys could be allowed", err)
	}
	t.Log("formats/note's RFC 6962 verifier accepted a junk RSA signature: RSA keys stay refused")
}

func p384SPKI(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(k.Public())
	return base64.StdEncoding.EncodeToString(der)
}
