package checkpoint

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// rfc6962Signer signs checkpoints as a static-ct-api log does: an
// RFC6962NoteSignature, the 8-byte timestamp and a TLS DigitallySigned
// ECDSA P-256 signature over the RFC 6962 TreeHeadSignature of the
// checkpoint's size and root at that time.
type rfc6962Signer struct {
	name string
	hash uint32
	key  *ecdsa.PrivateKey
	at   time.Time
}

func (s *rfc6962Signer) Name() string    { return s.name }
func (s *rfc6962Signer) KeyHash() uint32 { return s.hash }
func (s *rfc6962Signer) Sign(msg []byte) ([]byte, error) {
	c, err := Parse(msg)
	if err != nil {
		return nil, err
	}
	ts := uint64(s.at.UnixMilli())
	var ths []byte
	ths = append(ths, 0, 1) // v1, tree_hash
	ths = binary.BigEndian.AppendUint64(ths, ts)
	ths = binary.BigEndian.AppendUint64(ths, c.Size)
	ths = append(ths, c.Root[:]...)
	d := sha256.Sum256(ths)
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, d[:])
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint64(nil, ts)
	out = append(out, 4, 3) // SHA-256, ECDSA
	out = binary.BigEndian.AppendUint16(out, uint16(len(sig)))
	return append(out, sig...), nil
}

// ctLogKeys returns a static-ct-api log's checkpoint signer (signing at
// at) and its RFC 6962 verifier key.
func ctLogKeys(t *testing.T, name string, at time.Time) (*rfc6962Signer, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := fnote.RFC6962VerifierString(name, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	v, err := fnote.NewRFC6962Verifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return &rfc6962Signer{name: v.Name(), hash: v.KeyHash(), key: k, at: at}, vkey
}

const ctOrigin = "ct.example/2026h2"

// mirrorHead signs a static-ct-api checkpoint of logSize entries and a
// mirror's head of size keys bound to it.
func mirrorHead(t *testing.T, ls note.Signer, logV note.Verifier, ms note.Signer, size, logSize uint64, at time.Time) []byte {
	t.Helper()
	lmsg, err := note.Sign(&note.Note{Text: string(mustBody(t, Checkpoint{Origin: ctOrigin, Size: logSize, Root: sha256.Sum256([]byte{byte(logSize)})}))}, ls)
	if err != nil {
		t.Fatal(err)
	}
	h := Head{Origin: ms.Name(), Size: size, Root: sha256.Sum256([]byte{byte(size), 'm'}), Time: at}
	if err := h.BindLog(lmsg, logV); err != nil {
		t.Fatal(err)
	}
	msg, err := SignHead(h, ms)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func mustBody(t *testing.T, c Checkpoint) []byte {
	t.Helper()
	b, err := c.Body()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMirrorHeadRoundTrip: a mirror's head bound to a static-ct-api
// checkpoint (no timestamp line, ECDSA RFC6962NoteSignature) signs, opens
// with both pins, re-encodes to the signed body, and gives the log's
// signing time from the signature.
func TestMirrorHeadRoundTrip(t *testing.T) {
	logAt := now.Add(-time.Minute)
	ls, lvkey := ctLogKeys(t, ctOrigin, logAt)
	logV, err := NewLogVerifier(lvkey)
	if err != nil {
		t.Fatal(err)
	}
	ms, mv := keys(t, "mirror.example/ct")
	msg := mirrorHead(t, ls, logV, ms, 7, 9, now)
	h, err := OpenMirrorHead(msg, mv, logV, time.Hour, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	if h.Origin != "mirror.example/ct" || h.Size != 7 || h.Log.Size != 9 || h.Log.Origin != ctOrigin || !h.Log.Time.IsZero() {
		t.Fatalf("head %+v", h)
	}
	if !h.LogTime().Equal(logAt.Truncate(time.Millisecond)) {
		t.Fatalf("log time %v, want %v from the RFC 6962 signature", h.LogTime(), logAt)
	}
	body, err := h.Body()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(msg), string(body)) {
		t.Fatal("head does not re-encode to the signed body")
	}
	if !strings.Contains(string(body), "\nlog "+ctOrigin+" 9 "+base64.StdEncoding.EncodeToString(h.Log.Root[:])+"\n") {
		t.Fatalf("log line of a static-ct-api checkpoint carries a timestamp:\n%s", body)
	}
	// The rebuilt log note is the static-ct-api checkpoint, which the
	// transparency-dev verifier accepts on its own.
	lmsg, err := h.LogNote()
	if err != nil {
		t.Fatal(err)
	}
	fv, _ := fnote.NewRFC6962Verifier(lvkey)
	if _, err := note.Open(lmsg, note.VerifierList(fv)); err != nil {
		t.Fatalf("the bound checkpoint as rebuilt does not verify: %v", err)
	}
	if _, err := OpenMirrorHeadAnyAge(msg, mv, logV); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorHeadRefused: a head under the wrong mirror key, bound to a
// checkpoint of the wrong log key, with the two signatures swapped, with
// a truncated log signature, or with one key for both, is refused.
func TestMirrorHeadRefused(t *testing.T) {
	ls, lvkey := ctLogKeys(t, ctOrigin, now)
	logV, _ := NewLogVerifier(lvkey)
	_, otherLvkey := ctLogKeys(t, ctOrigin, now) // same origin, another key
	otherLogV, _ := NewLogVerifier(otherLvkey)
	ms, mv := keys(t, "mirror.example/ct")
	_, otherMv := keys(t, "mirror.example/ct")
	good := mirrorHead(t, ls, logV, ms, 3, 5, now)
	if _, err := OpenMirrorHead(good, mv, logV, time.Hour, time.Minute, now); err != nil {
		t.Fatal(err)
	}
	h, err := ParseHead(good[:strings.Index(string(good), "\n\n")+1])
	if err != nil {
		t.Fatal(err)
	}
	resign := func(edit func(*Head)) []byte {
		c := *h
		c.LogSignature = append([]byte(nil), h.LogSignature...)
		edit(&c)
		msg, err := SignHead(c, ms)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	// Swapped: the mirror's head signature placed as the log signature,
	// and the log's signature as the head's, under the mirror's key.
	hn, _ := note.Open(good, note.VerifierList(mv))
	headSig, _ := base64.StdEncoding.DecodeString(hn.Sigs[0].Base64)
	swappedBody := *h
	swappedBody.LogSignature = headSig
	sb, _ := swappedBody.Body()
	logSig := append(binary.BigEndian.AppendUint32(nil, mv.KeyHash()), h.LogSignature[4:]...)
	swapped := []byte(string(sb) + "\n\u2014 " + mv.Name() + " " + base64.StdEncoding.EncodeToString(logSig) + "\n")
	for name, tc := range map[string]struct {
		msg        []byte
		headV, lgV note.Verifier
		want       error
	}{
		"wrong mirror key":    {good, otherMv, logV, ErrSignature},
		"wrong log key":       {good, mv, otherLogV, ErrLogSignature},
		"swapped signatures":  {swapped, mv, logV, ErrSignature},
		"log sig by mirror":   {resign(func(c *Head) { c.LogSignature = headSig }), mv, logV, ErrLogSignature},
		"log size changed":    {resign(func(c *Head) { c.Log.Size++ }), mv, logV, ErrLogSignature},
		"log time added":      {resign(func(c *Head) { c.Log.Time = now }), mv, logV, ErrLogSignature},
		"log signature short": {resign(func(c *Head) { c.LogSignature = c.LogSignature[:MinLogSignature] }), mv, logV, ErrLogSignature},
		"another log":         {resign(func(c *Head) { c.Log.Origin = "other.example/log" }), mv, logV, ErrOrigin},
		"stale":               {resign(func(c *Head) { c.Time = now.Add(-2 * time.Hour) }), mv, logV, ErrStale},
	} {
		if _, err := OpenMirrorHead(tc.msg, tc.headV, tc.lgV, time.Hour, time.Minute, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := OpenMirrorHead(good, logV, logV, time.Hour, time.Minute, now); err == nil {
		t.Error("one key as both head and log key accepted")
	}
}

// TestNewLogVerifier: Ed25519 and ECDSA P-256 RFC 6962 keys are accepted;
// RSA RFC 6962 keys and other algorithms are refused by name.
func TestNewLogVerifier(t *testing.T) {
	_, vkey, _ := GenerateKey(origin)
	if v, err := NewLogVerifier(vkey); err != nil || v.Name() != origin {
		t.Fatalf("Ed25519 key: %v", err)
	}
	_, lvkey := ctLogKeys(t, ctOrigin, now)
	if v, err := NewLogVerifier(lvkey); err != nil || v.Name() != ctOrigin {
		t.Fatalf("RFC 6962 ECDSA key: %v", err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rvkey, err := fnote.RFC6962VerifierString(ctOrigin, rk.Public())
	if err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]string{
		"RSA":         rvkey,
		"unknown alg": "ct.example+01234567+" + base64.StdEncoding.EncodeToString([]byte{9, 1, 2}),
		"junk":        "not a key",
		"empty":       "",
	} {
		if _, err := NewLogVerifier(k); err == nil {
			t.Errorf("%s key accepted", name)
		}
	}
}

// FuzzOpenMirrorHead: the log signature a mirror's head carries comes
// from an untrusted relay once the head is signed (a mirror is not the
// log), and reaches the RFC 6962 verifier of another package. Heads signed
// with the mirror's key over any log signature bytes and log line never
// make OpenMirrorHead panic, and are accepted only with the log's genuine
// signature.
func FuzzOpenMirrorHead(f *testing.F) {
	at := time.UnixMilli(1795791540000)
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	lvkey, _ := fnote.RFC6962VerifierString(ctOrigin, k.Public())
	fv, _ := fnote.NewRFC6962Verifier(lvkey)
	ls := &rfc6962Signer{name: fv.Name(), hash: fv.KeyHash(), key: k, at: at}
	logV, err := NewLogVerifier(lvkey)
	if err != nil {
		f.Fatal(err)
	}
	mskey, mvkey, _ := GenerateKey("mirror.example/ct")
	ms, _ := NewSigner(mskey)
	mv, _ := NewVerifier(mvkey)
	lmsg, err := note.Sign(&note.Note{Text: ctOrigin + "\n9\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"}, ls)
	if err != nil {
		f.Fatal(err)
	}
	var genuine Head
	if err := genuine.BindLog(lmsg, logV); err != nil {
		f.Fatal(err)
	}
	f.Add(genuine.LogSignature, uint64(9), false)
	f.Add(genuine.LogSignature[:16], uint64(9), false)
	f.Add(append(binary.BigEndian.AppendUint32(nil, logV.KeyHash()), make([]byte, 12)...), uint64(9), true)
	f.Fuzz(func(t *testing.T, sig []byte, logSize uint64, withTime bool) {
		h := Head{Origin: ms.Name(), Size: 3, Root: [32]byte{7}, Time: at, Log: genuine.Log, LogSignature: sig}
		h.Log.Size = logSize
		if withTime {
			h.Log.Time = at
		}
		msg, err := SignHead(h, ms)
		if err != nil {
			return
		}
		got, err := OpenMirrorHead(msg, mv, logV, time.Hour, time.Minute, at)
		if err != nil {
			return
		}
		if logSize != 9 || withTime || string(got.LogSignature) != string(sig) {
			t.Fatalf("accepted a head bound to a checkpoint the log did not sign: size %d, time %v", logSize, withTime)
		}
	})
}
