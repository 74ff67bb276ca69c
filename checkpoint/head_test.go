package checkpoint

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// signedHead signs a log checkpoint of logSize entries and a head of size
// keys bound to it.
func signedHead(t *testing.T, s note.Signer, v note.Verifier, size, logSize uint64, at time.Time) []byte {
	t.Helper()
	lmsg, err := Sign(Checkpoint{Origin: v.Name(), Size: logSize, Root: sha256.Sum256([]byte{byte(logSize)}), Time: at.Add(-time.Second)}, s)
	if err != nil {
		t.Fatal(err)
	}
	h := Head{Origin: HeadOrigin(v.Name()), Size: size, Root: sha256.Sum256([]byte{byte(size), 's'}), Time: at}
	if err := h.BindLog(lmsg, v); err != nil {
		t.Fatal(err)
	}
	hs, err := HeadSigner(s, v)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := SignHead(h, hs)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestHeadIsNotACheckpoint: no checkpoint parser takes a sorted-tree head
// for a checkpoint, nor a checkpoint verifier of the log's key its
// signature, so a witness or monitor can never read successive heads as an
// inconsistent log.
func TestHeadIsNotACheckpoint(t *testing.T) {
	s, v := keys(t, origin)
	msg := signedHead(t, s, v, 5, 9, now)
	text := string(msg[:strings.Index(string(msg), "\n\n")+1])
	if _, err := Parse([]byte(text)); err == nil {
		t.Fatal("checkpoint.Parse accepts a sorted-tree head")
	}
	if _, err := tlog.ParseTree([]byte(text)); err == nil {
		t.Fatal("tlog.ParseTree accepts a sorted-tree head")
	}
	if _, err := Open(msg, v, HeadOrigin(origin), time.Hour, time.Minute, now); err == nil {
		t.Fatal("checkpoint.Open with the log key accepts a sorted-tree head")
	}
	hv, err := HeadVerifier(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(msg, hv, HeadOrigin(origin), time.Hour, time.Minute, now); !errors.Is(err, ErrMalformed) {
		t.Fatalf("checkpoint.Open with the head key: %v, want ErrMalformed", err)
	}
	if hv.Name() != HeadOrigin(origin) || hv.KeyHash() == v.KeyHash() {
		t.Fatalf("head key %s/%08x, log key %s/%08x: want its own name and key ID", hv.Name(), hv.KeyHash(), v.Name(), v.KeyHash())
	}
	// A log checkpoint is no head either.
	lmsg, err := Sign(sample(), s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenHead(lmsg, v, time.Hour, time.Minute, now); !errors.Is(err, ErrOrigin) {
		t.Fatalf("OpenHead of a log checkpoint: %v", err)
	}
}

// TestSuccessiveHeads: heads of trees that are not consistent with each
// other (another size, another root) all verify under the same origin,
// with sumdb/note too, and round-trip.
func TestSuccessiveHeads(t *testing.T) {
	s, v := keys(t, origin)
	hv, err := HeadVerifier(v)
	if err != nil {
		t.Fatal(err)
	}
	for i, size := range []uint64{5, 3, 9} {
		at := now.Add(time.Duration(i) * time.Minute)
		msg := signedHead(t, s, v, size, size+uint64(i), at)
		if _, err := note.Open(msg, note.VerifierList(hv)); err != nil {
			t.Fatalf("sumdb/note rejects head %d: %v", i, err)
		}
		h, err := OpenHead(msg, v, time.Hour, time.Minute, at)
		if err != nil {
			t.Fatalf("head %d: %v", i, err)
		}
		if h.Size != size || h.Log.Size != size+uint64(i) || h.Origin != HeadOrigin(origin) || !h.Time.Equal(at) {
			t.Fatalf("head %d: %+v", i, h)
		}
		body, err := h.Body()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(msg), string(body)) {
			t.Fatalf("head %d does not re-encode to the signed body", i)
		}
	}
}

// TestHeadBinding: a head whose log checkpoint was not signed by the log
// key, names another log, or is stale or future, is refused.
func TestHeadBinding(t *testing.T) {
	s, v := keys(t, origin)
	other, ov := keys(t, origin) // same name, another key
	good := signedHead(t, s, v, 5, 9, now)
	if _, err := OpenHead(good, v, time.Hour, time.Minute, now); err != nil {
		t.Fatal(err)
	}
	h, err := ParseHead([]byte(string(good[:strings.Index(string(good), "\n\n")+1])))
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := HeadSigner(s, v)
	resign := func(edit func(*Head)) []byte {
		c := *h
		edit(&c)
		msg, err := SignHead(c, hs)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	lmsg, _ := Sign(Checkpoint{Origin: origin, Size: 9, Root: sha256.Sum256([]byte("x")), Time: now}, other)
	var foreign Head
	if err := foreign.BindLog(lmsg, ov); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		msg  []byte
		want error
	}{
		"wrong log root":          {resign(func(c *Head) { c.Log.Root[0] ^= 1 }), ErrLogSignature},
		"wrong log size":          {resign(func(c *Head) { c.Log.Size++ }), ErrLogSignature},
		"log signed by other key": {resign(func(c *Head) { c.Log, c.LogSignature = foreign.Log, foreign.LogSignature }), ErrLogSignature},
		"another log":             {resign(func(c *Head) { c.Log.Origin = "other.example/log" }), ErrOrigin},
		"another origin":          {resign(func(c *Head) { c.Origin = "pkie.example/other" }), ErrOrigin},
		"stale":                   {resign(func(c *Head) { c.Time = now.Add(-2 * time.Hour) }), ErrStale},
		"future":                  {resign(func(c *Head) { c.Time = now.Add(time.Hour) }), ErrFuture},
	} {
		if _, err := OpenHead(tc.msg, v, time.Hour, time.Minute, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// Signed by the log key under its own name: not a head.
	n, _ := note.Sign(&note.Note{Text: string(good[:strings.Index(string(good), "\n\n")+1])}, s)
	if _, err := OpenHead(n, v, time.Hour, time.Minute, now); !errors.Is(err, ErrSignature) {
		t.Errorf("head signed under the log's key name: %v, want ErrSignature", err)
	}
}

// TestLegacyHead: a sorted-tree root signed the old way, as a checkpoint,
// is named as such.
func TestLegacyHead(t *testing.T) {
	s, v := keys(t, origin)
	c := sample()
	c.Origin = HeadOrigin(origin)
	msg, err := Sign(c, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenHead(msg, v, time.Hour, time.Minute, now); !errors.Is(err, ErrLegacyHead) {
		t.Fatalf("OpenHead of a legacy root: %v, want ErrLegacyHead", err)
	}
	if got, err := OpenLegacyHead(msg, v, HeadOrigin(origin)); err != nil || got.Size != c.Size {
		t.Fatalf("OpenLegacyHead: %v, %+v", err, got)
	}
}

func TestHeadVerifierNeedsKey(t *testing.T) {
	_, vkey, _ := GenerateKey(origin)
	plain, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := HeadVerifier(plain); err == nil {
		t.Fatal("HeadVerifier derived a key from a verifier without its public key")
	}
}
