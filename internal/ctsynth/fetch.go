package ctsynth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/transparency-dev/formats/log"
	tnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api/layout"
	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/internal/ctwire"
)

// entryKey is the key of the certificate a data tile's entry logs, as the
// ceiling computes it: ctwire.CertKey of an x509 entry's certificate, or
// ctwire.PrecertKey of a precert entry. (A mirror also keys a final
// certificate with an embedded SCT list by its precertificate, which means
// fetching its issuer and rewriting its TBS; the ceiling does not.)
func entryKey(e *ctwire.Entry) [32]byte {
	if e.Precert {
		return ctwire.PrecertKey(e.IssuerKeyHash, e.Certificate)
	}
	return ctwire.CertKey(e.Certificate)
}

// parseDataTile parses a data tile with ctwire's parser, the one every
// follower uses, and checks it holds want entries.
func parseDataTile(tile []byte, want int) ([]ctwire.Entry, error) {
	es, err := ctwire.ParseDataTile(tile)
	if err != nil {
		return nil, err
	}
	if len(es) != want {
		return nil, fmt.Errorf("data tile: %d entries, want %d", len(es), want)
	}
	return es, nil
}

// Fetcher reads a static-ct-api log's monitoring paths over HTTP.
type Fetcher struct {
	URL    string // monitoring prefix, ending in "/"
	Client *http.Client
	// MaxTile bounds one response (default 16 MiB).
	MaxTile int64
}

func (f *Fetcher) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL+path, nil)
	if err != nil {
		return nil, err
	}
	c := f.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	max := f.MaxTile
	if max == 0 {
		max = 16 << 20
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("GET %s: more than %d bytes", path, max)
	}
	return b, nil
}

func tileWidth(n, size uint64) uint8 { return layout.PartialTileSize(0, n, size) }

// IngestResult is what one pass over a log's data tiles measured.
type IngestResult struct {
	Entries          uint64  `json:"entries"`
	Bytes            uint64  `json:"bytes"`
	Seconds          float64 `json:"seconds"`
	EntriesPerSecond float64 `json:"entries_per_second"`
	// KeyXOR folds every key computed, so the work cannot be skipped and
	// two passes can be compared.
	KeyXOR [32]byte `json:"-"`
}

// Ingest is the ceiling of any mirror of the log: it GETs every data tile of
// a log of size entries with workers concurrent requests, parses it, and
// computes each entry's RFC 6962 leaf hash and key (EntryKey), checking
// nothing and storing nothing.
func (f *Fetcher) Ingest(ctx context.Context, size uint64, workers int, progress io.Writer) (*IngestResult, error) {
	if workers < 1 {
		workers = 1
	}
	tiles := (size + TileWidth - 1) / TileWidth
	var next, done, nbytes atomic.Uint64
	var mu sync.Mutex
	var keyXOR [32]byte
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	stop := reportEvery(progress, func() string {
		d := done.Load()
		return fmt.Sprintf("ceiling: fetched and hashed %d of %d entries, %.0f entries/s", d, size, float64(d)/time.Since(start).Seconds())
	})
	defer stop()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var x [32]byte
			defer func() { mu.Lock(); xorInto(&keyXOR, &x); mu.Unlock() }()
			for {
				n := next.Add(1) - 1
				if n >= tiles || ctx.Err() != nil {
					return
				}
				p := tileWidth(n, size)
				b, err := f.get(ctx, "tile/data/"+layout.NWithSuffix(0, n, p))
				if err != nil {
					cancel(err)
					return
				}
				want := TileWidth
				if p > 0 {
					want = int(p)
				}
				es, err := parseDataTile(b, want)
				for i := 0; err == nil && i < len(es); i++ {
					var h [32]byte
					if h, err = es[i].LeafHash(); err == nil {
						k := entryKey(&es[i])
						x[0] ^= h[0]
						xorInto(&x, &k)
					}
				}
				if err != nil {
					cancel(fmt.Errorf("tile %d: %w", n, err))
					return
				}
				nbytes.Add(uint64(len(b)))
				done.Add(uint64(want))
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	s := time.Since(start).Seconds()
	return &IngestResult{Entries: done.Load(), Bytes: nbytes.Load(), Seconds: s, EntriesPerSecond: float64(done.Load()) / s, KeyXOR: keyXOR}, nil
}

func xorInto(dst, src *[32]byte) {
	for i := range dst {
		dst[i] ^= src[i]
	}
}

// reportEvery calls line every 5 s and writes it to w until stop is called.
func reportEvery(w io.Writer, line func() string) (stop func()) {
	if w == nil {
		return func() {}
	}
	t := time.NewTicker(5 * time.Second)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-t.C:
				fmt.Fprintln(w, line())
			case <-quit:
				return
			}
		}
	})
	return func() { t.Stop(); close(quit); wg.Wait() }
}

// Checkpoint fetches the log's checkpoint and verifies it with vkey (a
// formats/note RFC 6962 verifier key).
func (f *Fetcher) Checkpoint(ctx context.Context, vkey string) (*log.Checkpoint, []byte, error) {
	v, err := tnote.NewRFC6962Verifier(vkey)
	if err != nil {
		return nil, nil, fmt.Errorf("log key: %w", err)
	}
	raw, err := f.get(ctx, "checkpoint")
	if err != nil {
		return nil, nil, err
	}
	n, err := note.Open(raw, note.VerifierList(v))
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	cp := new(log.Checkpoint)
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	if cp.Origin != v.Name() {
		return nil, nil, fmt.Errorf("checkpoint origin %q, want %q", cp.Origin, v.Name())
	}
	return cp, raw, nil
}

// ErrMismatch is returned (wrapped) by Verify when a tile disagrees with the
// log's hashes or signed root.
var ErrMismatch = errors.New("log does not match its checkpoint")

// Verify checks a whole log as a follower must: the checkpoint's signature,
// every entry's leaf hash against the level-0 hash tile, every stored
// higher-level hash tile against the tree recomputed from the leaves, and
// the recomputed root against the checkpoint's. It returns the checkpoint.
func (f *Fetcher) Verify(ctx context.Context, vkey string) (*log.Checkpoint, error) {
	cp, _, err := f.Checkpoint(ctx, vkey)
	if err != nil {
		return nil, err
	}
	size := cp.Size
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	var upper [][]byte // per tile level >= 1: the recomputed hashes
	visit := func(id compact.NodeID, h []byte) {
		if id.Level%8 == 0 && id.Level > 0 {
			l := int(id.Level / 8)
			for len(upper) < l {
				upper = append(upper, nil)
			}
			upper[l-1] = append(upper[l-1], h...)
		}
	}
	for n := uint64(0); n*TileWidth < size; n++ {
		p := tileWidth(n, size)
		data, err := f.get(ctx, "tile/data/"+layout.NWithSuffix(0, n, p))
		if err != nil {
			return nil, err
		}
		hashes, err := f.get(ctx, layout.TilePath(0, n, p))
		if err != nil {
			return nil, err
		}
		want := TileWidth
		if p > 0 {
			want = int(p)
		}
		if len(hashes) != 32*want {
			return nil, fmt.Errorf("%w: hash tile 0/%d has %d bytes, want %d", ErrMismatch, n, len(hashes), 32*want)
		}
		es, err := parseDataTile(data, want)
		for i := 0; err == nil && i < len(es); i++ {
			var h [32]byte
			if h, err = es[i].LeafHash(); err != nil {
				break
			}
			if !bytes.Equal(h[:], hashes[32*i:32*i+32]) {
				err = fmt.Errorf("%w: entry %d's leaf hash differs from the hash tile's", ErrMismatch, n*TileWidth+uint64(i))
				break
			}
			err = cr.Append(h[:], visit)
		}
		if err != nil {
			return nil, fmt.Errorf("data tile %d: %w", n, err)
		}
	}
	root, err := cr.GetRootHash(nil)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(root, cp.Hash) {
		return nil, fmt.Errorf("%w: the entries' root %x is not the checkpoint's %x", ErrMismatch, root, cp.Hash)
	}
	for i, hs := range upper {
		level := uint64(i + 1)
		count := uint64(len(hs) / 32)
		for n := uint64(0); n*TileWidth < count; n++ {
			p := layout.PartialTileSize(level, n, size)
			got, err := f.get(ctx, layout.TilePath(level, n, p))
			if err != nil {
				return nil, err
			}
			end := min((n+1)*TileWidth, count)
			if !bytes.Equal(got, hs[n*TileWidth*32:end*32]) {
				return nil, fmt.Errorf("%w: hash tile %d/%d differs from the recomputed tree", ErrMismatch, level, n)
			}
		}
	}
	return cp, nil
}
