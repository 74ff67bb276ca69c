package ctlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	f_log "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/client"
	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/internal/ttpstate"
)

// ErrBehind is wrapped by the errors of Open for a storage that does not
// hold the tree the log last signed (lost, replaced or rolled back), and
// of the checkpoint signer asked to sign such a tree.
var ErrBehind = errors.New("ctlog: the storage is behind the last signed checkpoint")

func nowMilli() uint64 { return uint64(time.Now().UnixMilli()) }

// signedHead is a checkpoint the log signed.
type signedHead struct {
	size uint64
	root [32]byte
	ts   uint64 // ms
	note []byte
}

// guardedSigner is the note.Signer Tessera signs checkpoints with. Before
// it returns a signature it checks that the tree extends the last one the
// log signed (a consistency proof from the storage's tiles, verified
// against both roots) and records the new checkpoint in StateFile, synced:
// a checkpoint is never published that StateFile does not hold.
//
// It also paces the checkpoints: with spacing set, it signs no sooner than
// spacing after its previous signature, waiting for the rest if asked
// sooner (see pace).
type guardedSigner struct {
	cs    *checkpointSigner
	path  string
	tiles atomic.Pointer[client.TileFetcherFunc] // set once Tessera's reader exists

	// spacing is the least time between two signatures; zero: none.
	spacing time.Duration
	// clock and sleep are time.Now and time.Sleep (tests replace them).
	clock func() time.Time
	sleep func(time.Duration)

	mu     sync.Mutex
	last   signedHead
	signed time.Time // when this process last signed (clock), zero before
}

func (g *guardedSigner) Name() string    { return g.cs.Name() }
func (g *guardedSigner) KeyHash() uint32 { return g.cs.KeyHash() }

func (g *guardedSigner) Sign(msg []byte) ([]byte, error) {
	cp, err := parseCheckpointText(msg, g.cs.origin)
	if err != nil {
		return nil, err
	}
	root := cp.root()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pace()
	if err := g.extends(context.Background(), cp.Size, root); err != nil {
		return nil, err
	}
	// STH timestamps only move forward, whatever the clock does.
	ts := max(g.cs.now(), g.last.ts+1)
	sig, err := g.cs.signAt(ts, cp.Size, root)
	if err != nil {
		return nil, err
	}
	n := signedNote(msg, g.cs.origin, g.cs.keyHash, sig)
	if err := ttpstate.Write(g.path, &ttpstate.State{Checkpoint: string(n)}); err != nil {
		return nil, fmt.Errorf("ctlog: recording the checkpoint before publishing it: %w", err)
	}
	g.last = signedHead{size: cp.Size, root: root, ts: ts, note: n}
	if g.spacing > 0 {
		g.signed = g.clock()
	}
	return sig, nil
}

// pace waits until spacing has passed since the previous signature.
//
// Why: Tessera's POSIX publisher, woken by a newly integrated batch less
// than its CheckpointInterval after the last publication, skips it and
// sleeps a whole interval more before it looks again, so an entry
// integrated just after a checkpoint waited up to two intervals for the
// next one (and add-chain with it). Open therefore runs that publisher at
// half the log's interval, and the signer holds each checkpoint until the
// log's interval has passed: a grown tree is published at the later of
// its integration and one interval after the previous checkpoint, and
// checkpoints still come at most once an interval. The wait is at most
// spacing (half of it when Tessera calls at half the interval), during
// which Tessera holds only its publication lock: sequencing and
// integration go on.
func (g *guardedSigner) pace() {
	if g.spacing <= 0 || g.signed.IsZero() {
		return
	}
	if d := g.spacing - g.clock().Sub(g.signed); d > 0 {
		g.sleep(min(d, g.spacing))
	}
}

// extends checks that the tree of size and root extends g.last.
func (g *guardedSigner) extends(ctx context.Context, size uint64, root [32]byte) error {
	last := g.last
	switch {
	case size < last.size:
		return fmt.Errorf("%w: asked to sign a tree of %d entries, but the log last signed one of %d (%s); refusing to sign a smaller tree under the same key",
			ErrBehind, size, last.size, StateFile)
	case size == last.size && root != last.root:
		return fmt.Errorf("%w: asked to sign a tree of %d entries with root %x…, but the log signed that size with root %x… (%s)",
			ErrBehind, size, root[:8], last.root[:8], StateFile)
	case size == last.size || last.size == 0:
		return nil
	}
	f := g.tiles.Load()
	if f == nil {
		return errors.New("ctlog: cannot check consistency before the storage is open")
	}
	return consistent(ctx, *f, last.size, size, last.root, root)
}

// consistent verifies, from the tiles of the tree of size n, that it
// extends the tree of size m with root rm.
func consistent(ctx context.Context, f client.TileFetcherFunc, m, n uint64, rm, rn [32]byte) error {
	pb, err := client.NewProofBuilder(ctx, n, f)
	if err != nil {
		return fmt.Errorf("ctlog: reading the tree of %d: %w", n, err)
	}
	p, err := pb.ConsistencyProof(ctx, m, n)
	if err != nil {
		return fmt.Errorf("ctlog: consistency proof %d→%d: %w", m, n, err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, m, n, p, rm[:], rn[:]); err != nil {
		return fmt.Errorf("%w: the tree of %d entries (root %x…) does not extend the tree of %d the log last signed (root %x…, %s): %v",
			ErrBehind, n, rn[:8], m, rm[:8], StateFile, err)
	}
	return nil
}

// rootAt computes the root of the tree of size n from its tiles.
func rootAt(ctx context.Context, f client.TileFetcherFunc, n uint64) ([32]byte, error) {
	var r [32]byte
	if n == 0 {
		copy(r[:], rfc6962.DefaultHasher.EmptyRoot())
		return r, nil
	}
	nodes, err := client.FetchRangeNodes(ctx, n, f)
	if err != nil {
		return r, fmt.Errorf("ctlog: reading the tree of %d: %w", n, err)
	}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr, err := rf.NewRange(0, n, nodes)
	if err != nil {
		return r, fmt.Errorf("ctlog: the tree of %d: %w", n, err)
	}
	h, err := cr.GetRootHash(nil)
	if err != nil {
		return r, fmt.Errorf("ctlog: the tree of %d: %w", n, err)
	}
	copy(r[:], h)
	return r, nil
}

// readState reads StateFile and verifies its checkpoint with the log's key.
func readState(path string, v note.Verifier, origin string) (signedHead, error) {
	st, err := ttpstate.Read(path)
	if err != nil {
		return signedHead{}, fmt.Errorf("ctlog: %w (it records what the log last signed: restore it from a backup; a log cannot start a second history under its key)", err)
	}
	cp, _, n, err := f_log.ParseCheckpoint([]byte(st.Checkpoint), origin, v)
	if err != nil {
		return signedHead{}, fmt.Errorf("ctlog: %s: %w", path, err)
	}
	ts, err := noteTimestamp(n)
	if err != nil {
		return signedHead{}, fmt.Errorf("ctlog: %s: %w", path, err)
	}
	h := signedHead{size: cp.Size, ts: ts, note: []byte(st.Checkpoint)}
	copy(h.root[:], cp.Hash)
	return h, nil
}

// checkStorage refuses a storage whose integrated tree does not extend
// the last signed checkpoint.
func checkStorage(ctx context.Context, r tessera.LogReader, last signedHead) error {
	n, err := r.IntegratedSize(ctx)
	if err != nil {
		return fmt.Errorf("ctlog: reading the storage's tree size: %w", err)
	}
	if n < last.size {
		return fmt.Errorf("%w: the storage holds %d entries, but the log last signed a tree of %d (%s). "+
			"Restore the storage from a backup; a log cannot start a second history under its key", ErrBehind, n, last.size, StateFile)
	}
	f := client.TileFetcherFunc(r.ReadTile)
	root, err := rootAt(ctx, f, n)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBehind, err)
	}
	if n == last.size {
		if root != last.root {
			return fmt.Errorf("%w: the storage's tree of %d entries has root %x…, but the log signed root %x… at that size (%s)",
				ErrBehind, n, root[:8], last.root[:8], StateFile)
		}
		return nil
	}
	if last.size == 0 {
		return nil
	}
	return consistent(ctx, f, last.size, n, last.root, root)
}
