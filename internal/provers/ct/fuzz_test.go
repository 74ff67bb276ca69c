package ct_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/loglist"
	ctpkie "github.com/pkie/pkie/internal/pkies/ct"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/testbed"
)

// FuzzProveParams: whatever a client sends as ct parameters, the prover
// does not panic, and either refuses the request as unsupported or
// returns a ct body that decodes. The listed log is unreachable and the
// fuzzed SCTs are not its signatures, so nothing is fetched.
func FuzzProveParams(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	spki, _ := x509.MarshalPKIXPublicKey(key.Public())
	id := sha256.Sum256(spki)
	now := time.Now()
	list, err := loglist.Write([]*loglist.Log{{Key: key.Public(), Description: "fuzz log", Operator: "Fuzz Operator", Kind: loglist.Static,
		URL: "http://127.0.0.1:1/", MonitoringURL: "http://127.0.0.1:1/", MMD: 24 * time.Hour, State: loglist.Usable,
		StateSince: now.Add(-24 * time.Hour).UTC().Truncate(time.Second)}}, now)
	if err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(f.TempDir(), "list.json")
	if err := os.WriteFile(path, list, 0o644); err != nil {
		f.Fatal(err)
	}
	p, err := ctprover.NewProver(context.Background(), pkie.ProverEnv{}, ctprover.ProverConfig{LogList: path}.JSON())
	if err != nil {
		f.Fatal(err)
	}
	root, _ := testbed.NewRootCA("Fuzz Root", testbed.ECDSAP256)
	leaf, _ := root.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
	subj := leafSubject("www.example.test", leaf)

	// An SCT from the listed log, with a signature that is not one.
	raw := []byte{0}
	raw = append(raw, id[:]...)
	raw = binary.BigEndian.AppendUint64(raw, uint64(now.UnixMilli()))
	raw = append(raw, 0, 0, 4, 3, 0, 4, 1, 2, 3, 4)
	one, err := sct.MarshalList([][]byte{raw})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(one)
	two, _ := sct.MarshalList([][]byte{raw, raw})
	f.Add(two)
	f.Add([]byte{})
	f.Add([]byte{0, 2, 0, 0})
	f.Fuzz(func(t *testing.T, params []byte) {
		proof, err := p.Prove(context.Background(), &pkie.ProveRequest{Subject: subj, Params: params})
		if err != nil {
			if !errors.Is(err, pkie.ErrUnsupported) {
				t.Fatalf("not ErrUnsupported: %v", err)
			}
			return
		}
		var b ctpkie.Body
		if err := b.UnmarshalBinary(proof.Body); err != nil {
			t.Fatalf("the prover's body does not decode: %v", err)
		}
		if b.Tree != nil || len(b.Inclusions) != 0 {
			t.Fatalf("evidence for a fuzzed SCT: %+v", b)
		}
	})
}
