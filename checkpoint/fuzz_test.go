package checkpoint

import (
	"strings"
	"testing"
	"time"
)

// FuzzParse: Parse never panics, and what it accepts encodes back to a body
// that parses to the same checkpoint.
func FuzzParse(f *testing.F) {
	f.Add([]byte("pkie.example/log\n5\nx2Xmr6X5jkM6mFQn3nqsOc2sHNvU4o1UpeJQqzxFoOc=\ntimestamp 1795791540000\n"))
	f.Add([]byte("o\n0\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nx\n"))
	f.Add([]byte("o\n5\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		c, err := Parse(text)
		if err != nil {
			return
		}
		body, err := c.Body()
		if err != nil {
			t.Fatalf("parsed checkpoint does not encode: %v", err)
		}
		d, err := Parse(body)
		if err != nil {
			t.Fatalf("re-encoded checkpoint does not parse: %v", err)
		}
		if d.Origin != c.Origin || d.Size != c.Size || d.Root != c.Root || !d.Time.Equal(c.Time) || len(d.Extensions) != len(c.Extensions) {
			t.Fatalf("round trip changed the checkpoint")
		}
		_ = c.Time.After(time.Time{})
	})
}

// FuzzParseHead: ParseHead never panics, never accepts what Parse accepts
// (a head is never a checkpoint), and what it accepts re-encodes to the
// same text.
func FuzzParseHead(f *testing.F) {
	f.Add([]byte("pkie.example/log/sorted\npkie sorted-tree-head v1\nsize 5\nroot x2Xmr6X5jkM6mFQn3nqsOc2sHNvU4o1UpeJQqzxFoOc=\ntimestamp 1795791540000\n" +
		"log pkie.example/log 9 x2Xmr6X5jkM6mFQn3nqsOc2sHNvU4o1UpeJQqzxFoOc= 1795791539000\n" +
		"log-signature AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"))
	f.Add([]byte("pkie.example/log/sorted\n5\nx2Xmr6X5jkM6mFQn3nqsOc2sHNvU4o1UpeJQqzxFoOc=\ntimestamp 1795791540000\n"))
	f.Add([]byte("o\npkie sorted-tree-head v1\n"))
	// A mirror's head bound to a static-ct-api checkpoint: no log
	// timestamp, an RFC6962NoteSignature.
	f.Add([]byte("mirror.example/ct\npkie sorted-tree-head v1\nsize 5\nroot x2Xmr6X5jkM6mFQn3nqsOc2sHNvU4o1UpeJQqzxFoOc=\ntimestamp 1795791540000\n" +
		"log ct.example/2026h2 9 x2Xmr6X5jkM6mFQn3nqsOc2sHNvU4o1UpeJQqzxFoOc=\n" +
		"log-signature AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		h, err := ParseHead(text)
		if err != nil {
			return
		}
		if _, err := Parse(text); err == nil {
			t.Fatal("a text parses both as a head and as a checkpoint")
		}
		body, err := h.Body()
		if err != nil {
			t.Fatalf("parsed head does not encode: %v", err)
		}
		if string(body) != string(text) {
			t.Fatalf("head re-encodes to %q, parsed from %q", body, text)
		}
	})
}

// FuzzOpenHead: OpenHead, which verifiers run on what a prover relays,
// never panics on any note, and accepts only heads whose body re-encodes
// to the signed text.
func FuzzOpenHead(f *testing.F) {
	skey, vkey, err := GenerateKey("fuzz.example/log")
	if err != nil {
		f.Fatal(err)
	}
	s, _ := NewSigner(skey)
	v, _ := NewVerifier(vkey)
	at := time.UnixMilli(1795791540000)
	lmsg, _ := Sign(Checkpoint{Origin: v.Name(), Size: 9, Root: [32]byte{1}, Time: at}, s)
	h := Head{Origin: HeadOrigin(v.Name()), Size: 5, Root: [32]byte{2}, Time: at}
	if err := h.BindLog(lmsg, v); err != nil {
		f.Fatal(err)
	}
	hs, _ := HeadSigner(s, v)
	msg, err := SignHead(h, hs)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg)
	f.Add(lmsg)
	f.Add([]byte("x\n\n\u2014 fuzz.example/log/sorted AAAA\n"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		got, err := OpenHead(msg, v, 100*365*24*time.Hour, time.Hour, at)
		if err != nil {
			return
		}
		body, err := got.Body()
		if err != nil || !strings.HasPrefix(string(msg), string(body)) {
			t.Fatalf("accepted head does not re-encode to its signed text: %v", err)
		}
	})
}
