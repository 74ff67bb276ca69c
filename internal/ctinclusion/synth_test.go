package ctinclusion

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"testing"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/loglist"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// synthLog is a log key that signs tree heads for the unit tests and
// benchmarks, over trees that exist only as one leaf's audit path: a
// random path from a leaf defines a root, and the log signs that root.
// Verify's cost depends only on the path's length, so a path as long as
// a large real log's is enough to measure it.
type synthLog struct {
	key    *ecdsa.PrivateKey
	log    *loglist.Log
	signer note.Signer
}

func newSynthLog(t testing.TB, kind loglist.Kind, origin string) *synthLog {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spki, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	l := &loglist.Log{ID: sha256.Sum256(spki), Key: key.Public(), SPKI: spki, Description: "synthetic " + origin,
		Kind: kind, URL: "https://" + origin + "/", MonitoringURL: "http://127.0.0.1:1/", MMD: 24 * time.Hour, State: loglist.Usable}
	vkey, err := fnote.RFC6962VerifierString(origin, key.Public())
	if err != nil {
		t.Fatal(err)
	}
	v, err := fnote.NewRFC6962Verifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return &synthLog{key: key, log: l, signer: &rfc6962Signer{name: v.Name(), hash: v.KeyHash(), key: key}}
}

// rfc6962Signer signs checkpoints with an RFC6962NoteSignature (C2SP
// static-ct-api): the timestamp, then a DigitallySigned TreeHeadSignature
// of the checkpoint's size and root.
type rfc6962Signer struct {
	name string
	hash uint32
	key  *ecdsa.PrivateKey
	ts   uint64
}

func (s *rfc6962Signer) Name() string    { return s.name }
func (s *rfc6962Signer) KeyHash() uint32 { return s.hash }
func (s *rfc6962Signer) Sign(msg []byte) ([]byte, error) {
	c, err := checkpoint.Parse(msg)
	if err != nil {
		return nil, err
	}
	sth := STH{TreeSize: c.Size, Timestamp: s.ts, Root: c.Root}
	ds, err := signSTH(s.key, &sth)
	if err != nil {
		return nil, err
	}
	return append(appendUint64(nil, s.ts), ds...), nil
}

// signSTH returns the DigitallySigned TreeHeadSignature of sth.
func signSTH(key *ecdsa.PrivateKey, sth *STH) ([]byte, error) {
	d := sha256.Sum256(sth.treeHeadSignature())
	sig, err := ecdsa.SignASN1(rand.Reader, key, d[:])
	if err != nil {
		return nil, err
	}
	return append(appendUint16([]byte{hashSHA256, sigECDSA}, uint16(len(sig))), sig...), nil
}

// treeHead signs a tree head of size and root at ts: a checkpoint for a
// static-ct-api log, an STH (MarshalSTH) for an RFC 6962 one.
func (s *synthLog) treeHead(t testing.TB, size uint64, root [32]byte, ts time.Time) []byte {
	t.Helper()
	ms := uint64(ts.UnixMilli())
	if s.log.Kind == loglist.RFC6962 {
		sth := &STH{TreeSize: size, Timestamp: ms, Root: root}
		var err error
		if sth.Signature, err = signSTH(s.key, sth); err != nil {
			t.Fatal(err)
		}
		b, err := MarshalSTH(sth)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s.signer.(*rfc6962Signer).ts = ms
	c := checkpoint.Checkpoint{Origin: s.log.Origin(), Size: size, Root: root}
	body, err := c.Body()
	if err != nil {
		t.Fatal(err)
	}
	b, err := note.Sign(&note.Note{Text: string(body)}, s.signer)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// included returns Included evidence for leaf at index in a tree of size,
// with a random audit path, signed at ts.
func (s *synthLog) included(t testing.TB, leaf [32]byte, index, size uint64, ts time.Time) *Evidence {
	t.Helper()
	for n := 0; n <= MaxProof; n++ {
		p := make([][]byte, n)
		for i := range p {
			p[i] = make([]byte, 32)
			rand.Read(p[i])
		}
		root, err := proof.RootFromInclusionProof(rfc6962.DefaultHasher, index, size, leaf[:], p)
		if err != nil {
			continue
		}
		e := &Evidence{SCTHash: [32]byte{0x5c}, LogID: s.log.ID, Status: Included, LeafIndex: index,
			Checkpoint: s.treeHead(t, size, [32]byte(root), ts), Proof: make([][32]byte, n)}
		for i := range p {
			e.Proof[i] = [32]byte(p[i])
		}
		return e
	}
	t.Fatalf("no audit path length fits index %d in %d", index, size)
	return nil
}
