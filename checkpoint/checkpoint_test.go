package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

var (
	now    = time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)
	origin = "pkie.example/log"
)

func keys(t *testing.T, name string) (note.Signer, note.Verifier) {
	t.Helper()
	skey, vkey, err := GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

func sample() Checkpoint {
	return Checkpoint{Origin: origin, Size: 2129920, Root: sha256.Sum256([]byte("root")), Time: now.Add(-time.Minute)}
}

// TestVerifiesWithSumdbNote checks the signed checkpoint with
// golang.org/x/mod/sumdb/note directly and with Open, and that the body
// follows the C2SP layout.
func TestVerifiesWithSumdbNote(t *testing.T) {
	s, v := keys(t, origin)
	c := sample()
	msg, err := Sign(c, s)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		t.Fatalf("sumdb/note rejects the checkpoint: %v", err)
	}
	if len(n.Sigs) != 1 || n.Sigs[0].Name != origin {
		t.Fatalf("signatures: %+v", n.Sigs)
	}
	want := fmt.Sprintf("%s\n2129920\n%s\ntimestamp %d\n", origin, base64.StdEncoding.EncodeToString(c.Root[:]), c.Time.UnixMilli())
	if n.Text != want {
		t.Fatalf("body = %q", n.Text)
	}
	got, err := Open(msg, v, origin, time.Hour, time.Minute, now)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got.Origin != c.Origin || got.Size != c.Size || got.Root != c.Root || !got.Time.Equal(c.Time) {
		t.Fatalf("Open = %+v, want %+v", got, c)
	}
}

func TestOpenRejects(t *testing.T) {
	s, v := keys(t, origin)
	_, otherV := keys(t, origin)
	otherS, _ := keys(t, "other.example/log")
	sign := func(c Checkpoint, s note.Signer) []byte {
		msg, err := Sign(c, s)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	good := sign(sample(), s)
	at := func(d time.Duration) Checkpoint { c := sample(); c.Time = now.Add(d); return c }
	wrongOrigin := sample()
	wrongOrigin.Origin = "evil.example/log"
	noTime := sample()
	noTime.Time = time.Time{}
	tampered := bytes.Replace(good, []byte("2129920"), []byte("2129921"), 1)

	tests := []struct {
		name string
		msg  []byte
		v    note.Verifier
		want error
	}{
		{"stale", sign(at(-2*time.Hour), s), v, ErrStale},
		{"just stale", sign(at(-time.Hour-time.Millisecond), s), v, ErrStale},
		{"future", sign(at(2*time.Minute), s), v, ErrFuture},
		{"wrong origin", sign(wrongOrigin, s), v, ErrOrigin},
		{"no timestamp", sign(noTime, s), v, ErrNoTime},
		{"tampered body", tampered, v, ErrSignature},
		{"other key, same name", good, otherV, ErrSignature},
		{"signed by someone else", sign(sample(), otherS), v, ErrSignature},
		{"garbage", []byte("hello"), v, ErrSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := Open(tc.msg, tc.v, origin, time.Hour, time.Minute, now); !errors.Is(err, tc.want) {
				t.Fatalf("Open = %+v, %v; want %v", c, err, tc.want)
			}
		})
	}
	// The edges of the window are accepted.
	for _, d := range []time.Duration{-time.Hour, time.Minute, 0} {
		if _, err := Open(sign(at(d), s), v, origin, time.Hour, time.Minute, now); err != nil {
			t.Errorf("time now%+v: %v", d, err)
		}
	}
	if _, err := Open(good, v, origin, 0, time.Minute, now); err == nil {
		t.Error("zero maximum age accepted")
	}
	if _, err := Open(good, v, origin, time.Hour, -time.Second, now); err == nil {
		t.Error("negative skew accepted")
	}
}

// TestReplayAfterUpdate: a root that was fresh when signed is rejected once
// it is older than the maximum age, which is what stops a prover replaying
// an old "not revoked" proof after a revocation (PEC §7).
func TestReplayAfterUpdate(t *testing.T) {
	s, v := keys(t, origin)
	old, _ := Sign(sample(), s)
	if _, err := Open(old, v, origin, 10*time.Minute, time.Minute, now); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(old, v, origin, 10*time.Minute, time.Minute, now.Add(10*time.Minute)); !errors.Is(err, ErrStale) {
		t.Fatalf("replayed after the maximum age: %v", err)
	}
}

func TestParse(t *testing.T) {
	root := "x2Xmr6X5jkM6mFQn3nqsOc2sHNvU4o1UpeJQqzxFoOc="
	tests := []struct {
		text string
		ok   bool
	}{
		{"o\n0\n" + root + "\n", true},
		{"o\n18446744073709551615\n" + root + "\n", true},
		{"o\n5\n" + root + "\ntimestamp 1\nfoo bar\n", true},
		{"o\n5\n" + root + "\nother\ntimestamp 99\n", true},
		{"o\n5\n" + root, false},
		{"o\n5\n", false},
		{"\n5\n" + root + "\n", false},
		{"o\n05\n" + root + "\n", false},
		{"o\n+5\n" + root + "\n", false},
		{"o\n18446744073709551616\n" + root + "\n", false},
		{"o\n5\n" + root[:len(root)-1] + "\n", false},
		{"o\n5\n" + strings.TrimSuffix(root, "=") + "\n", false},
		{"o\n5\nAAAA\n", false},
		{"o\n5\n" + root + "\n\n", false},
		{"o\n5\n" + root + "\ntimestamp 01\n", false},
		{"o\n5\n" + root + "\ntimestamp 0\n", false},
		{"o\n5\n" + root + "\ntimestamp -1\n", false},
		{"o\n5\n" + root + "\ntimestamp 1\ntimestamp 2\n", false},
		{"o\n5\n" + root + "\ntimestamp 99999999999999999\n", false},
	}
	for _, tc := range tests {
		c, err := Parse([]byte(tc.text))
		if (err == nil) != tc.ok {
			t.Errorf("Parse(%q) = %v, want ok=%v", tc.text, err, tc.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("Parse(%q): %v is not ErrMalformed", tc.text, err)
			}
			continue
		}
		body, err := c.Body()
		if err != nil || string(body) != tc.text && !strings.Contains(tc.text, "other\ntimestamp") {
			t.Errorf("Parse(%q) does not round-trip: %q, %v", tc.text, body, err)
		}
	}
}

func TestBodyRejects(t *testing.T) {
	for _, c := range []Checkpoint{
		{Origin: ""},
		{Origin: "a\nb"},
		{Origin: "o", Time: time.Unix(-5, 0)},
		{Origin: "o", Extensions: []string{""}},
		{Origin: "o", Extensions: []string{"a\nb"}},
		{Origin: "o", Extensions: []string{"timestamp 5"}},
	} {
		if _, err := c.Body(); err == nil {
			t.Errorf("Body(%+v) accepted", c)
		}
	}
}

func TestDetached(t *testing.T) {
	s, v := keys(t, origin)
	c := sample()
	msg, _ := Sign(c, s)
	det, err := Detach(msg, v)
	if err != nil {
		t.Fatal(err)
	}
	if len(det) != DetachedSize {
		t.Fatalf("%d bytes", len(det))
	}
	got, err := OpenDetached(det, origin, c.Size, c.Root, v, time.Hour, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Root != c.Root || got.Size != c.Size || !got.Time.Equal(c.Time) {
		t.Fatalf("got %+v", got)
	}
	otherRoot := c.Root
	otherRoot[0] ^= 1
	_, otherV := keys(t, origin)
	for name, f := range map[string]func() error{
		"wrong root": func() error {
			_, err := OpenDetached(det, origin, c.Size, otherRoot, v, time.Hour, time.Minute, now)
			return err
		},
		"wrong size": func() error {
			_, err := OpenDetached(det, origin, c.Size+1, c.Root, v, time.Hour, time.Minute, now)
			return err
		},
		"wrong origin": func() error {
			_, err := OpenDetached(det, "x", c.Size, c.Root, v, time.Hour, time.Minute, now)
			return err
		},
		"wrong key": func() error {
			_, err := OpenDetached(det, origin, c.Size, c.Root, otherV, time.Hour, time.Minute, now)
			return err
		},
		"stale": func() error {
			_, err := OpenDetached(det, origin, c.Size, c.Root, v, time.Hour, time.Minute, now.Add(2*time.Hour))
			return err
		},
		"short": func() error {
			_, err := OpenDetached(det[1:], origin, c.Size, c.Root, v, time.Hour, time.Minute, now)
			return err
		},
	} {
		if f() == nil {
			t.Errorf("%s accepted", name)
		}
	}
	for i := range det {
		b := bytes.Clone(det)
		b[i] ^= 0x10
		if _, err := OpenDetached(b, origin, c.Size, c.Root, v, time.Hour, 24*time.Hour*365*100, now); err == nil {
			t.Errorf("byte %d changed, accepted", i)
		}
	}
	if _, err := Detach(msg, otherV); err == nil {
		t.Error("Detach with the wrong key succeeded")
	}
}
