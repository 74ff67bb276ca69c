package obc

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzDecodeRecord feeds decodeRecord what a damaged or hostile store
// file could hold: it must never panic, and whatever it accepts must be a
// usable certificate whose key matches it.
func FuzzDecodeRecord(f *testing.F) {
	now := time.Now().UnixNano()
	for _, a := range []Alg{ECDSAP256, Ed25519, RSA1024} {
		k, err := a.GenerateKey()
		if err != nil {
			f.Fatal(err)
		}
		cert, err := selfSign(k, time.Now())
		if err != nil {
			f.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(a), der, cert, now, now)
		f.Add(string(a), der[:len(der)/2], cert, now, now)
		f.Add(string(a), der, cert[:len(cert)-3], now, now+1)
	}
	f.Add("ecdsa-p256", []byte{}, []byte{}, int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, alg string, key, cert []byte, created, lastUsed int64) {
		tc, leaf, err := decodeRecord(alg, key, cert, created, lastUsed)
		if err != nil {
			if tc != nil || leaf != nil {
				t.Fatal("an error with a certificate")
			}
			return
		}
		if !bytes.Equal(tc.Certificate[0], cert) || tc.Leaf != leaf {
			t.Fatal("decoded certificate is not the record's")
		}
		if !publicKeyEqual(tc.PrivateKey.(crypto.Signer).Public(), leaf.PublicKey) {
			t.Fatal("accepted a certificate of another key")
		}
		if a, err := algOf(tc.PrivateKey); err != nil || string(a) != alg {
			t.Fatalf("accepted alg %q for a %s key (%v)", alg, a, err)
		}
	})
}

// FuzzOpenFile opens whatever bytes a store file might hold (a damaged
// disk, a truncated copy, another program's file): Open, List and Get must
// fail cleanly or work, never panic or hang.
func FuzzOpenFile(f *testing.F) {
	dir := f.TempDir()
	good := filepath.Join(dir, "seed.db")
	s, err := Open(context.Background(), good, StoreOptions{})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.Get(context.Background(), Origin{Scheme: "https", Host: "seed.example", Port: 443}); err != nil {
		f.Fatal(err)
	}
	s.Close()
	// Fold the WAL into the file so that the seed is one self-contained
	// database.
	raw := openRaw(f, good)
	if _, err := raw.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		f.Fatal(err)
	}
	if _, err := raw.Exec("PRAGMA journal_mode=DELETE"); err != nil {
		f.Fatal(err)
	}
	raw.Close()
	seed, err := os.ReadFile(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte("SQLite format 3\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "obc.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := Open(ctx, path, StoreOptions{})
		if err != nil {
			return
		}
		defer s.Close()
		recs, _ := s.List(ctx)
		for _, r := range recs {
			if r.Problem == "" && r.Identity == (Identity{}) {
				t.Fatalf("record %q without problem nor identity", r.Scope)
			}
		}
		if r, err := s.Get(ctx, Origin{Scheme: "https", Host: "seed.example", Port: 443}); err == nil && r.Cert.Leaf == nil {
			t.Fatal("Get returned a certificate without its leaf")
		}
	})
}
