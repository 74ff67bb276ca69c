package ctfollow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	ct "github.com/google/certificate-transparency-go"
	"github.com/pkie/pkie/internal/ctwire"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
	"golang.org/x/mod/sumdb/note"
)

// chunkWidth is the number of entries one fetch job covers: a data tile's
// width, and what an RFC 6962 follower asks get-entries for at a time.
const chunkWidth = layout.EntryBundleWidth

// source is one log's read API, whichever protocol it speaks.
type source interface {
	// checkpoint returns the log's newest checkpoint as a signed note
	// (not yet verified: the caller verifies it).
	checkpoint(ctx context.Context) ([]byte, error)
	// consistency returns the consistency proof between tree sizes
	// size1 < size2.
	consistency(ctx context.Context, size1, size2 uint64) ([][]byte, error)
	// chunk returns the entries with index in [from, to), the part of the
	// tree of size treeSize that chunk c = from/chunkWidth covers.
	chunk(ctx context.Context, from, to, treeSize uint64) ([]ctwire.Entry, error)
}

// Fetchers read a static-ct-api log without HTTP, such as a log in the same
// process (ctlog's Reader). They have the shapes of Tessera's client
// fetcher functions; EntryBundle returns data tiles (tile/data/...).
type Fetchers struct {
	Checkpoint  client.CheckpointFetcherFunc
	Tile        client.TileFetcherFunc
	EntryBundle client.EntryBundleFetcherFunc
	// Issuer returns the issuer certificate with SHA-256 fingerprint fp
	// (static-ct-api's issuer/<hex fp>). Optional: without it, a
	// certificate with embedded SCTs logged as an x509_entry gets its
	// CertKey only (ctwire.EntryKeys).
	Issuer func(ctx context.Context, fp [32]byte) ([]byte, error)
}

// staticSource reads a static-ct-api log's tiles.
type staticSource struct {
	f Fetchers

	mu      sync.Mutex
	issuers map[[32]byte][32]byte // issuer fingerprint → SPKI hash
}

// maxIssuerCache bounds the issuer cache; real logs chain to a few
// hundred intermediates.
const maxIssuerCache = 4096

func newHTTPStatic(g *httpGetter) *staticSource {
	return &staticSource{f: Fetchers{
		Checkpoint: func(ctx context.Context) ([]byte, error) {
			return g.get(ctx, layout.CheckpointPath, maxCheckpoint)
		},
		Tile: func(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
			return partialOrFull(ctx, p, func(ctx context.Context, p uint8) ([]byte, error) {
				return g.get(ctx, layout.TilePath(level, index, p), maxHashTile)
			})
		},
		EntryBundle: func(ctx context.Context, index uint64, p uint8) ([]byte, error) {
			return partialOrFull(ctx, p, func(ctx context.Context, p uint8) ([]byte, error) {
				return g.get(ctx, "tile/data/"+layout.NWithSuffix(0, index, p), maxDataTile)
			})
		},
		Issuer: func(ctx context.Context, fp [32]byte) ([]byte, error) {
			return g.get(ctx, "issuer/"+hex.EncodeToString(fp[:]), maxIssuer)
		},
	}, issuers: map[[32]byte][32]byte{}}
}

// partialOrFull fetches a partial tile, falling back to the full tile
// when the partial one is gone (a log deletes partial tiles once the full
// tile exists), as tlog-tiles clients must.
func partialOrFull(ctx context.Context, p uint8, f func(context.Context, uint8) ([]byte, error)) ([]byte, error) {
	b, err := f(ctx, p)
	if p != 0 && errors.Is(err, fs.ErrNotExist) {
		return f(ctx, 0)
	}
	return b, err
}

func (s *staticSource) checkpoint(ctx context.Context) ([]byte, error) {
	return s.f.Checkpoint(ctx)
}

// checkedTile wraps the tile fetcher so a proof is built from whole hash
// tiles only: a tile must hold whole hashes, and at least as many as the
// partial width asked for.
func (s *staticSource) checkedTile(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
	b, err := s.f.Tile(ctx, level, index, p)
	if err != nil {
		return nil, err
	}
	want := int(p)
	if want == 0 {
		want = layout.TileWidth
	}
	if len(b)%32 != 0 || len(b)/32 < want || len(b) > maxHashTile {
		return nil, fmt.Errorf("hash tile %d/%d: %d bytes, want %d hashes of 32 bytes", level, index, len(b), want)
	}
	return b, nil
}

func (s *staticSource) consistency(ctx context.Context, size1, size2 uint64) ([][]byte, error) {
	pb, err := client.NewProofBuilder(ctx, size2, s.checkedTile)
	if err != nil {
		return nil, err
	}
	return pb.ConsistencyProof(ctx, size1, size2)
}

func (s *staticSource) chunk(ctx context.Context, from, to, treeSize uint64) ([]ctwire.Entry, error) {
	tile := from / chunkWidth
	p := layout.PartialTileSize(0, tile, treeSize)
	b, err := s.f.EntryBundle(ctx, tile, p)
	if err != nil {
		return nil, fmt.Errorf("data tile %d: %w", tile, err)
	}
	entries, err := ctwire.ParseDataTile(b)
	if err != nil {
		return nil, &EntriesError{Index: tile * chunkWidth, Err: err}
	}
	if entries[0].Index != tile*chunkWidth {
		return nil, &EntriesError{Index: tile * chunkWidth, Err: fmt.Errorf("data tile %d starts at leaf index %d", tile, entries[0].Index)}
	}
	end := tile*chunkWidth + uint64(len(entries))
	if end < to {
		return nil, &EntriesError{Index: end, Err: fmt.Errorf("data tile %d holds %d entries, the checkpoint needs %d", tile, len(entries), to-tile*chunkWidth)}
	}
	entries = entries[from-tile*chunkWidth : to-tile*chunkWidth]
	for i := range entries {
		if err := s.resolveIssuer(ctx, &entries[i]); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// resolveIssuer fills in e.ChainIssuerKeyHash for an x509_entry that
// carries embedded SCTs, fetching its issuer by fingerprint; the issuer's
// bytes must hash to the fingerprint the data tile gives.
func (s *staticSource) resolveIssuer(ctx context.Context, e *ctwire.Entry) error {
	if e.Precert || len(e.ChainFingerprints) == 0 || s.f.Issuer == nil || !ctwire.HasEmbeddedSCTs(e.Certificate) {
		return nil
	}
	fp := e.ChainFingerprints[0]
	s.mu.Lock()
	h, ok := s.issuers[fp]
	s.mu.Unlock()
	if !ok {
		der, err := s.f.Issuer(ctx, fp)
		if err != nil {
			return fmt.Errorf("issuer of entry %d: %w", e.Index, err)
		}
		if sha256.Sum256(der) != fp {
			return &EntriesError{Index: e.Index, Err: fmt.Errorf("issuer %x served with other bytes", fp)}
		}
		if h, err = ctwire.SPKIHash(der); err != nil {
			return &EntriesError{Index: e.Index, Err: fmt.Errorf("issuer %x: %w", fp, err)}
		}
		s.mu.Lock()
		if len(s.issuers) >= maxIssuerCache {
			clear(s.issuers)
		}
		s.issuers[fp] = h
		s.mu.Unlock()
	}
	e.ChainIssuerKeyHash = &h
	return nil
}

// rfc6962Source reads an RFC 6962 log's JSON API (§4).
type rfc6962Source struct {
	g *httpGetter
	v note.Verifier
}

func (s *rfc6962Source) checkpoint(ctx context.Context) ([]byte, error) {
	j, err := s.g.get(ctx, "ct/v1/get-sth", maxJSONSmall)
	if err != nil {
		return nil, err
	}
	// RFC6962STHToCheckpoint verifies the STH's signature while it
	// converts it; the caller verifies the note again, so one path checks
	// both kinds of log.
	cp, err := fnote.RFC6962STHToCheckpoint(j, s.v)
	if err != nil {
		return nil, &CheckpointError{Err: fmt.Errorf("get-sth: %w", err)}
	}
	return cp, nil
}

func (s *rfc6962Source) consistency(ctx context.Context, size1, size2 uint64) ([][]byte, error) {
	j, err := s.g.get(ctx, "ct/v1/get-sth-consistency?first="+itoa(size1)+"&second="+itoa(size2), maxJSONSmall)
	if err != nil {
		return nil, err
	}
	var r ct.GetSTHConsistencyResponse
	if err := json.Unmarshal(j, &r); err != nil {
		return nil, fmt.Errorf("get-sth-consistency: %w", err)
	}
	return r.Consistency, nil
}

func (s *rfc6962Source) chunk(ctx context.Context, from, to, _ uint64) ([]ctwire.Entry, error) {
	entries := make([]ctwire.Entry, 0, to-from)
	for next := from; next < to; {
		j, err := s.g.get(ctx, "ct/v1/get-entries?start="+itoa(next)+"&end="+itoa(to-1), maxJSONEntries)
		if err != nil {
			return nil, err
		}
		got, err := parseGetEntries(j, next, to)
		if err != nil {
			return nil, err
		}
		entries = append(entries, got...)
		next += uint64(len(got))
	}
	return entries, nil
}

// parseGetEntries parses a get-entries answer for entries from next,
// before to: at least one entry and no more than asked for.
func parseGetEntries(j []byte, next, to uint64) ([]ctwire.Entry, error) {
	var r ct.GetEntriesResponse
	if err := json.Unmarshal(j, &r); err != nil {
		return nil, &EntriesError{Index: next, Err: fmt.Errorf("get-entries: %w", err)}
	}
	if len(r.Entries) == 0 {
		return nil, &EntriesError{Index: next, Err: errors.New("get-entries returned no entries")}
	}
	if uint64(len(r.Entries)) > to-next {
		return nil, &EntriesError{Index: next, Err: fmt.Errorf("get-entries returned %d entries, %d asked for", len(r.Entries), to-next)}
	}
	entries := make([]ctwire.Entry, 0, len(r.Entries))
	for i, le := range r.Entries {
		e, err := ctwire.ParseLeafEntry(next+uint64(i), le.LeafInput, le.ExtraData)
		if err != nil {
			return nil, &EntriesError{Index: next + uint64(i), Err: err}
		}
		entries = append(entries, *e)
	}
	return entries, nil
}
