package pkie

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestProofEnvelope(t *testing.T) {
	p := &Proof{ID: CT, Version: 1, Body: []byte("body")}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x00, 0x01, 0x01, 0x00, 0x00, 0x04, 'b', 'o', 'd', 'y'}; !bytes.Equal(b, want) {
		t.Fatalf("encoding = %x, want %x", b, want)
	}
	var q Proof
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if q.ID != p.ID || q.Version != p.Version || !bytes.Equal(q.Body, p.Body) {
		t.Fatalf("round trip = %+v, want %+v", q, p)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short header", []byte{0, 1, 1}, "shorter than"},
		{"missing body", []byte{0, 1, 1, 0, 0, 5, 'a'}, "5 body bytes, 1 follow"},
		{"trailing", append(append([]byte{}, b...), 0), "4 body bytes, 5 follow"},
		{"too large", []byte{0, 1, 1, 0xff, 0xff, 0xff}, "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q Proof
			err := q.UnmarshalBinary(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := (&Proof{Body: make([]byte, MaxProofBody+1)}).MarshalBinary(); err == nil {
		t.Fatal("an oversized body was encoded")
	}
}

func TestRequests(t *testing.T) {
	rs := []Request{{ID: CT}, {ID: Notary, Params: []byte{1, 2}}}
	b, err := MarshalRequests(rs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 1, 0, 0, 0, 3, 0, 2, 1, 2}; !bytes.Equal(b, want) {
		t.Fatalf("encoding = %x, want %x", b, want)
	}
	got, err := ParseRequests(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].ID != Notary || !bytes.Equal(got[1].Params, []byte{1, 2}) {
		t.Fatalf("parsed %+v", got)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated header", []byte{0, 1, 0}, "truncated"},
		{"truncated params", []byte{0, 1, 0, 2, 7}, "says 2 parameter bytes, 1 remain"},
		{"duplicate", []byte{0, 1, 0, 0, 0, 1, 0, 0}, "requested twice"},
		{"params too long", append([]byte{0, 1, 0x04, 0x01}, make([]byte, 1025)...), "at most 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequests(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	many := make([]byte, 0, 4*(MaxRequests+1))
	for i := range MaxRequests + 1 {
		many = append(many, 0, byte(i), 0, 0)
	}
	if _, err := ParseRequests(many); err == nil || !strings.Contains(err.Error(), "more than 32") {
		t.Fatalf("33 requests: err = %v", err)
	}
}

func FuzzProof(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 0, 4, 'b', 'o', 'd', 'y'})
	f.Add([]byte{0xff, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Proof
		if err := p.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := p.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded proof does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding %x gave %x", b, again)
		}
	})
}

func FuzzRequests(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 3, 0, 2, 1, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := ParseRequests(b)
		if err != nil {
			return
		}
		again, err := MarshalRequests(rs)
		if err != nil {
			t.Fatalf("parsed requests do not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding %x gave %x", b, again)
		}
	})
}

type nopVerifier ID

func (v nopVerifier) ID() ID { return ID(v) }
func (nopVerifier) Verify(context.Context, *VerifyRequest) Assertion {
	return Assertion{Status: Unknown}
}

func TestRegistry(t *testing.T) {
	newV := func(id ID) func(json.RawMessage) (Verifier, error) {
		return func(json.RawMessage) (Verifier, error) { return nopVerifier(id), nil }
	}
	var r Registry
	if err := r.Register(Kind{ID: CT, Name: "ct", NewVerifier: newV(CT)}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Kind{ID: 0xff01, Name: "policy", NewVerifier: newV(0xff01)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		k    Kind
		want string
	}{
		{"same id", Kind{ID: CT, Name: "other", NewVerifier: newV(CT)}, `already "ct"`},
		{"same name", Kind{ID: 9, Name: "ct", NewVerifier: newV(9)}, "already identifier 0x0001"},
		{"bad name", Kind{ID: 9, Name: "CT!", NewVerifier: newV(9)}, "lower-case"},
		{"no halves", Kind{ID: 9, Name: "empty"}, "neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Register(tc.k)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if k, ok := r.ByName("policy"); !ok || k.ID != 0xff01 {
		t.Fatalf("ByName(policy) = %+v, %v", k, ok)
	}
	if k, ok := r.ByName("0xff01"); !ok || k.Name != "policy" {
		t.Fatalf("ByName(0xff01) = %+v, %v", k, ok)
	}
	if _, ok := r.ByName("0x0002"); ok {
		t.Fatal("an unregistered identifier was found")
	}
	if got := r.Name(0x0042); got != "0x0042" {
		t.Fatalf("Name of an unknown id = %q", got)
	}
	ks := r.Kinds()
	if len(ks) != 2 || ks[0].ID != CT || ks[1].ID != 0xff01 {
		t.Fatalf("Kinds = %+v", ks)
	}
}

func TestRequester(t *testing.T) {
	ctx := t.Context()
	if got := Requester(ctx); got != "" {
		t.Fatalf("Requester of a bare context = %q", got)
	}
	a := WithRequester(ctx, "192.0.2.1")
	b := WithRequester(a, "2001:db8::/64")
	if Requester(a) != "192.0.2.1" || Requester(b) != "2001:db8::/64" {
		t.Fatalf("Requester = %q, %q", Requester(a), Requester(b))
	}
	// Another package's string-keyed value is not a requester.
	type other string
	if got := Requester(context.WithValue(ctx, other("pkie.requester"), "x")); got != "" {
		t.Fatalf("foreign key read as requester: %q", got)
	}
}
