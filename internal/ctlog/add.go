package ctlog

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"sync"

	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"
	f_log "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api/layout"
	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/internal/ctwire"
)

// ErrBusy is wrapped by AddChain's error when Tessera pushes back (too
// many entries waiting for integration): try again later (HTTP 503).
var ErrBusy = errors.New("ctlog: the log is busy; try again later")

// AddChainResponse is the log's answer to a chain: its SCT and where the
// entry is.
type AddChainResponse struct {
	// SCT is the RFC 6962 v1 signed certificate timestamp, signed with the
	// log's ECDSA key, carrying the static-ct-api leaf_index extension.
	SCT ct.SignedCertificateTimestamp
	// Index is the entry's index in the log (the leaf_index).
	Index uint64
	// Duplicate is set when the certificate was logged before: Index and
	// the SCT's timestamp are the original entry's.
	Duplicate bool
}

// JSON returns the RFC 6962 §4.1 add-chain response.
func (r *AddChainResponse) JSON() *ct.AddChainResponse {
	sig, _ := cttls.Marshal(cttls.DigitallySigned(r.SCT.Signature))
	return &ct.AddChainResponse{SCTVersion: r.SCT.SCTVersion, ID: r.SCT.LogID.KeyID[:], Timestamp: r.SCT.Timestamp,
		Extensions: base64.StdEncoding.EncodeToString(r.SCT.Extensions), Signature: sig}
}

// AddChain logs a chain (leaf first) as RFC 6962 add-chain (precert false)
// or add-pre-chain (precert true) do, waits until a published checkpoint
// includes the entry, and returns its SCT. A certificate already logged
// gets an SCT for its original entry. A refused chain is a
// *RejectedError, and nothing is stored.
func (l *Log) AddChain(ctx context.Context, chain [][]byte, precert bool) (*AddChainResponse, error) {
	v, err := l.validate(chain, precert, uint64(l.now().UnixMilli()))
	if err != nil {
		return nil, err
	}
	// Issuers first: a data tile must never name one that is not served.
	if err := l.issuers.putAll(ctx, v.issuers); err != nil {
		return nil, err
	}
	idx, cp, err := l.awaiter.Await(ctx, l.add(ctx, v.entry))
	switch {
	case errors.Is(err, tessera.ErrPushback):
		return nil, fmt.Errorf("%w (%v)", ErrBusy, err)
	case err != nil:
		return nil, fmt.Errorf("ctlog: adding the entry: %w", err)
	}
	res := &AddChainResponse{Index: idx.Index, Duplicate: idx.IsDup}
	tbs := v.entry.MerkleTreeLeaf(idx.Index)
	ts, ext := v.entry.Timestamp, leafIndexExtension(idx.Index)
	if idx.IsDup {
		size, err := checkpointSize(cp)
		if err != nil {
			return nil, err
		}
		e, err := l.entryAt(ctx, idx.Index, size)
		if err != nil {
			return nil, fmt.Errorf("ctlog: reading the original entry of a duplicate: %w", err)
		}
		if !bytes.Equal(e.Certificate, v.entry.Certificate) || e.Precert != v.entry.IsPrecert {
			return nil, fmt.Errorf("ctlog: the antispam index points at entry %d, which holds another certificate", idx.Index)
		}
		if tbs, err = e.MerkleTreeLeaf(); err != nil {
			return nil, err
		}
		ts, ext = e.Timestamp, e.Extensions
	}
	// An SCT's CertificateTimestamp (RFC 6962 §3.2) and the entry's
	// MerkleTreeLeaf are the same bytes: version 0, type 0 (certificate_
	// timestamp, timestamped_entry), then the TimestampedEntry.
	sig, err := signSCT(l.key, tbs)
	if err != nil {
		return nil, err
	}
	res.SCT = ct.SignedCertificateTimestamp{SCTVersion: ct.V1, LogID: ct.LogID{KeyID: l.logID}, Timestamp: ts,
		Extensions: ext, Signature: ct.DigitallySigned{Algorithm: cttls.SignatureAndHashAlgorithm{Hash: cttls.SHA256, Signature: cttls.ECDSA}, Signature: sig}}
	return res, nil
}

// AddChains submits chains (x509 entries) concurrently, so the log
// batches what arrives together, and returns once a checkpoint covers them
// all, or at the first refusal, naming the chain refused.
func (l *Log) AddChains(ctx context.Context, chains [][][]byte) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for i, c := range chains {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := l.AddChain(ctx, c, false); err != nil {
				cancel(fmt.Errorf("ctlog: chain %d: %w", i, err))
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// MarshalSCT returns the TLS encoding of an SCT (RFC 6962 §3.2), as a TLS
// extension or a certificate's SCT list carries it.
func MarshalSCT(sct *ct.SignedCertificateTimestamp) ([]byte, error) {
	return cttls.Marshal(*sct)
}

func signSCT(k *ecdsa.PrivateKey, msg []byte) ([]byte, error) {
	h := sha256.Sum256(msg)
	sig, err := ecdsa.SignASN1(rand.Reader, k, h[:])
	if err != nil {
		return nil, fmt.Errorf("ctlog: signing the SCT: %w", err)
	}
	return sig, nil
}

// checkpointSize reads the size of a checkpoint the log published
// (trusted: it comes from the log's own storage).
func checkpointSize(cp []byte) (uint64, error) {
	text, _, _ := bytes.Cut(cp, []byte("\n\n"))
	var c f_log.Checkpoint
	if _, err := c.Unmarshal(append(text, '\n')); err != nil {
		return 0, fmt.Errorf("ctlog: the published checkpoint: %w", err)
	}
	return c.Size, nil
}

// latest returns the latest published checkpoint, verified, its size and
// root, and the note.
func (l *Log) latest(ctx context.Context) (*f_log.Checkpoint, *note.Note, error) {
	b, err := l.reader.ReadCheckpoint(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("ctlog: reading the checkpoint: %w", err)
	}
	cp, _, n, err := f_log.ParseCheckpoint(b, l.origin, l.verify)
	if err != nil {
		return nil, nil, fmt.Errorf("ctlog: the storage's checkpoint: %w", err)
	}
	return cp, n, nil
}

// entryAt reads entry i of the tree of size n.
func (l *Log) entryAt(ctx context.Context, i, n uint64) (*ctwire.Entry, error) {
	if i >= n {
		return nil, fmt.Errorf("ctlog: entry %d is past the tree of %d", i, n)
	}
	b, err := l.readBundle(ctx, i/layout.EntryBundleWidth, layout.PartialTileSize(0, i/layout.EntryBundleWidth, n))
	if err != nil {
		return nil, err
	}
	es, err := ctwire.ParseDataTile(b)
	if err != nil {
		return nil, err
	}
	j := i % layout.EntryBundleWidth
	if j >= uint64(len(es)) {
		return nil, fmt.Errorf("ctlog: data tile %d holds %d entries, not entry %d", i/layout.EntryBundleWidth, len(es), i)
	}
	return &es[j], nil
}

// readTile reads a hash tile. A partial tile that is gone (the tile has
// since been filled) is cut from the full one: its first hashes are the
// same.
func (l *Log) readTile(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
	b, err := l.reader.ReadTile(ctx, level, index, p)
	if err != nil {
		return nil, err
	}
	want := 32 * layout.TileWidth
	if p > 0 {
		want = 32 * int(p)
	}
	switch {
	case len(b) == want:
		return b, nil
	case p > 0 && len(b) > want && len(b)%32 == 0:
		return b[:want], nil
	}
	return nil, fmt.Errorf("ctlog: tile %d/%d.p/%d: %d bytes stored: %w", level, index, p, len(b), os.ErrNotExist)
}

// readBundle reads a data tile, cut to p entries like readTile.
func (l *Log) readBundle(ctx context.Context, index uint64, p uint8) ([]byte, error) {
	b, err := l.reader.ReadEntryBundle(ctx, index, p)
	if err != nil {
		return nil, err
	}
	es, err := ctwire.ParseDataTile(b)
	if err != nil {
		return nil, fmt.Errorf("ctlog: stored data tile %d: %w", index, err)
	}
	want := layout.EntryBundleWidth
	if p > 0 {
		want = int(p)
	}
	switch {
	case len(es) == want:
		return b, nil
	case p > 0 && len(es) > want:
		// Entries are contiguous: cut after the want-th one.
		n := 0
		for _, e := range es[:want] {
			n += tileLeafSize(&e)
		}
		return b[:n], nil
	}
	return nil, fmt.Errorf("ctlog: data tile %d.p/%d: %d entries stored: %w", index, p, len(es), os.ErrNotExist)
}

// tileLeafSize is the size of e encoded as a static-ct-api TileLeaf.
func tileLeafSize(e *ctwire.Entry) int {
	n := 8 + 2 + 3 + len(e.Certificate) + 2 + len(e.Extensions) + 2 + 32*len(e.ChainFingerprints)
	if e.Precert {
		n += 32 + 3 + len(e.Precertificate)
	}
	return n
}

// hashIndex maps leaf hashes to indices for get-proof-by-hash, filled
// lazily from the level-0 tiles up to the tree size asked about.
type hashIndex struct {
	mu  sync.Mutex
	m   map[[32]byte]uint64
	n   uint64 // entries indexed
	max uint64
}

var errHashIndexFull = errors.New("ctlog: this log indexes leaf hashes for get-proof-by-hash only up to its configured size; read the tiles instead")

func (h *hashIndex) lookup(ctx context.Context, l *Log, size uint64, hash [32]byte) (uint64, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if size > h.max {
		return 0, false, errHashIndexFull
	}
	for h.n < size {
		t := h.n / layout.TileWidth
		b, err := l.readTile(ctx, 0, t, layout.PartialTileSize(0, t, size))
		if err != nil {
			return 0, false, err
		}
		if uint64(len(b)/32) <= h.n%layout.TileWidth {
			return 0, false, fmt.Errorf("ctlog: level-0 tile %d holds %d hashes, fewer than the %d indexed", t, len(b)/32, h.n%layout.TileWidth)
		}
		for j := h.n % layout.TileWidth; j < uint64(len(b)/32); j++ {
			var k [32]byte
			copy(k[:], b[32*j:])
			if _, dup := h.m[k]; !dup {
				h.m[k] = t*layout.TileWidth + j
			}
			h.n = t*layout.TileWidth + j + 1
		}
	}
	i, ok := h.m[hash]
	if ok && i >= size {
		ok = false
	}
	return i, ok, nil
}

// leafHash is the RFC 6962 leaf hash of a MerkleTreeLeaf.
func leafHash(mtl []byte) (h [32]byte) {
	copy(h[:], rfc6962.DefaultHasher.HashLeaf(mtl))
	return h
}
