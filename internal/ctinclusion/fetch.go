package ctinclusion

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/lru"
	"github.com/pkie/pkie/internal/sct"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api/layout"
)

// Bounds on what a Fetcher reads from a log. A hash tile is at most 256
// hashes; a data tile 256 entries, each a certificate (and for a
// precertificate, the precertificate too) of at most 64 KiB in every log
// pkie knows of, and their chains' fingerprints.
const (
	maxHashTile = 256 * 32
	maxDataTile = 256 * (2*64<<10 + 1024)
	maxJSON     = 64 << 10
)

// Fetcher fetches inclusion evidence straight from CT logs: what a PEC
// cloud does for its clients, or a client that accepts telling the logs
// which certificates it sees. It keeps each log's latest tree head for
// Refresh, and the tiles it read (immutable once published) in a bounded
// cache, so that a cloud calling Fetch for every request asks a log for
// little more than what is new. Everything it returns as Included,
// NotYet or Conflict it has verified (Verify) with the log's key.
//
// A Fetcher is safe for concurrent use; the zero value is ready, with the
// defaults below. Set its fields before the first Fetch.
type Fetcher struct {
	// HTTP is the client for the logs; nil means http.DefaultClient.
	HTTP *http.Client
	// Timeout bounds one request to a log; zero means 10s. Fetch honours
	// its context's deadline too.
	Timeout time.Duration
	// Refresh is how long a log's tree head is used before it is fetched
	// again; zero means 10s. A tree head that does not cover an SCT's
	// leaf_index is fetched again once it is MinRefresh old.
	Refresh time.Duration
	// MinRefresh is the least time between two fetches of a log's tree
	// head, and how long a failure to fetch it is remembered (and
	// returned without asking the log); zero means 1s.
	MinRefresh time.Duration
	// MaxTiles bounds the tile cache (hash tiles of 8 KiB at most, and
	// the leaf hashes of data tiles, as much); zero means 4096.
	MaxTiles int
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	once     sync.Once
	verifier *Verifier
	tiles    *lru.Cache[tileKey, []byte]
	mu       sync.Mutex
	logs     map[[32]byte]*logState
}

type tileKey struct {
	log        [32]byte
	data       bool
	level, idx uint64
	width      uint8
}

// fetchedHead is a log's verified tree head, as fetched.
type fetchedHead struct {
	raw     []byte // as it goes in Evidence.Checkpoint
	head    treeHead
	fetched time.Time
}

func (f *Fetcher) init() {
	f.once.Do(func() {
		n := f.MaxTiles
		if n <= 0 {
			n = 4096
		}
		f.tiles = lru.New[tileKey, []byte](n)
		f.verifier = NewVerifier(64)
		f.logs = make(map[[32]byte]*logState)
	})
}

func (f *Fetcher) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Fetch asks log, the SCT's log, for the evidence of s's entry, whose
// RFC 6962 leaf hash is leafHash (sct.Entry.LeafHash).
//
// For a static-ct-api log it reads the checkpoint from the monitoring
// URL; if the tree does not reach s's leaf_index, the evidence is NotYet;
// else it reads the data tile at leaf_index, whose entry must hash to
// leafHash, and the audit path from the hash tiles. For an RFC 6962 log
// it reads get-sth, then get-proof-by-hash; "not found" is NotYet.
//
// When the log's tree holds another entry at s's leaf_index, Fetch returns
// the Conflict evidence that shows it together with a *MismatchError; a
// relay passes the evidence on. Any other error means the lookup failed
// (it names the log and what failed) and is never evidence against s: a
// relay reports it as LookupFailed (Evidence.Status, Message).
func (f *Fetcher) Fetch(ctx context.Context, log *loglist.Log, s *sct.SCT, leafHash [32]byte) (*Evidence, error) {
	f.init()
	if s.LogID != log.ID {
		return nil, fmt.Errorf("ctinclusion: SCT from log %x…, asked of log %s", s.LogID[:6], logName(log))
	}
	var e *Evidence
	var err error
	switch log.Kind {
	case loglist.Static:
		e, err = f.fetchStatic(ctx, log, s, leafHash)
	case loglist.RFC6962:
		e, err = f.fetchRFC6962(ctx, log, s, leafHash)
	default:
		return nil, fmt.Errorf("ctinclusion: log %s is of kind %q; want %q or %q", logName(log), log.Kind, loglist.Static, loglist.RFC6962)
	}
	if e == nil {
		return nil, err
	}
	e.SCTHash, e.LogID = s.Hash(), log.ID
	// What Fetch returns it has verified, with the same code a client runs.
	if _, verr := f.verifier.Verify(e, log, leafHash); verr != nil {
		var mismatch *MismatchError
		if errors.As(verr, &mismatch) {
			return e, verr
		}
		return nil, fmt.Errorf("ctinclusion: log %s: what it served does not verify: %w", logName(log), verr)
	}
	return e, err
}

func (f *Fetcher) fetchStatic(ctx context.Context, log *loglist.Log, s *sct.SCT, leafHash [32]byte) (*Evidence, error) {
	idx, ok, err := s.LeafIndex()
	if err != nil {
		return nil, fmt.Errorf("ctinclusion: SCT of static-ct-api log %s: leaf_index: %w", logName(log), err)
	}
	if !ok {
		return nil, fmt.Errorf("ctinclusion: SCT of static-ct-api log %s has no leaf_index extension", logName(log))
	}
	if log.MonitoringURL == "" {
		return nil, fmt.Errorf("ctinclusion: static-ct-api log %s has no monitoring URL", logName(log))
	}
	h, err := f.head(ctx, log, idx)
	if err != nil {
		return nil, err
	}
	e := &Evidence{Status: NotYet, LeafIndex: idx, Checkpoint: h.raw}
	if idx >= h.head.size {
		return e, nil
	}
	got, err := f.dataTileLeaf(ctx, log, idx, h.head.size)
	if err != nil {
		return nil, err
	}
	if e.Proof, err = f.auditPath(ctx, log, idx, h.head.size); err != nil {
		return nil, err
	}
	e.Status = Included
	if got != leafHash {
		e.Status, e.Leaf = Conflict, got
	}
	return e, nil
}

// logState is what a Fetcher keeps about one log: its latest verified
// tree head, and the last failure to fetch one.
type logState struct {
	refresh sync.Mutex // held while the tree head is fetched, so that one Fetch fetches it for all

	mu    sync.Mutex
	head  *fetchedHead
	err   error
	errAt time.Time
}

func (f *Fetcher) state(id [32]byte) *logState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.logs[id]
	if st == nil {
		st = &logState{}
		f.logs[id] = st
	}
	return st
}

// head returns log's tree head, fetched again when the cached one is
// older than Refresh, or does not reach leaf index idx and is older than
// MinRefresh. One Fetch fetches it while the others for the log wait; a
// failure is remembered for MinRefresh, so that a log that is down gets
// one request a MinRefresh from a Fetcher, not one per Fetch. When the
// fetch fails, a tree head younger than Refresh is still used.
func (f *Fetcher) head(ctx context.Context, log *loglist.Log, idx uint64) (*fetchedHead, error) {
	st := f.state(log.ID)
	refresh, minRefresh := orDefault(f.Refresh, 10*time.Second), orDefault(f.MinRefresh, time.Second)
	cached := func(now time.Time) (*fetchedHead, error, bool) {
		st.mu.Lock()
		defer st.mu.Unlock()
		h := st.head
		usable := h != nil && now.Sub(h.fetched) < refresh
		if usable && (idx < h.head.size || now.Sub(h.fetched) < minRefresh) {
			return h, nil, true
		}
		if st.err != nil && now.Sub(st.errAt) < minRefresh {
			if usable {
				return h, nil, true
			}
			return nil, st.err, true
		}
		return nil, nil, false
	}
	if h, err, ok := cached(f.now()); ok {
		return h, err
	}
	st.refresh.Lock()
	defer st.refresh.Unlock()
	if h, err, ok := cached(f.now()); ok { // another Fetch has just fetched it
		return h, err
	}
	raw, err := f.fetchHead(ctx, log)
	var th treeHead
	if err == nil {
		if th, err = f.verifier.openHead(raw, log, nil); err != nil {
			err = fmt.Errorf("ctinclusion: the tree head log %s served: %w", logName(log), err)
		}
	}
	now := f.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil {
		// A caller that gave up is no news about the log.
		if ctx.Err() == nil {
			st.err, st.errAt = err, now
		}
		if h := st.head; h != nil && now.Sub(h.fetched) < refresh {
			return h, nil
		}
		return nil, err
	}
	// A log's tree only grows: a smaller one (a stale replica behind
	// the log's web server) does not replace the larger one, which is
	// still what the log signed; it is remembered as a failure, so that
	// the log is not asked again at once.
	if st.head != nil && th.size < st.head.head.size {
		st.err, st.errAt = fmt.Errorf("ctinclusion: log %s served a tree of %d entries after one of %d", logName(log), th.size, st.head.head.size), now
		return st.head, nil
	}
	st.err = nil
	st.head = &fetchedHead{raw: raw, head: th, fetched: now}
	return st.head, nil
}

// fetchHead reads log's tree head as Evidence.Checkpoint holds it.
func (f *Fetcher) fetchHead(ctx context.Context, log *loglist.Log) ([]byte, error) {
	if log.Kind == loglist.Static {
		return f.get(ctx, log, strings.TrimSuffix(log.MonitoringURL, "/")+"/checkpoint", MaxCheckpoint)
	}
	return f.getSTH(ctx, log)
}

// dataTileLeaf reads the data tile holding leaf index idx in a tree of
// size and returns the leaf hash of the entry at idx.
func (f *Fetcher) dataTileLeaf(ctx context.Context, log *loglist.Log, idx, size uint64) ([32]byte, error) {
	n := idx / layout.EntryBundleWidth
	w := layout.PartialTileSize(0, n, size)
	k := tileKey{log: log.ID, data: true, idx: n, width: w}
	hashes, ok := f.tiles.Get(k)
	if !ok {
		b, err := f.tile(ctx, log, "tile/data/"+layout.NWithSuffix(0, n, 0), w, maxDataTile)
		if err != nil {
			return [32]byte{}, err
		}
		entries, err := ctwire.ParseDataTile(b)
		if err != nil {
			return [32]byte{}, fmt.Errorf("ctinclusion: log %s's data tile %d: %w", logName(log), n, err)
		}
		want := int(w)
		if w == 0 {
			want = layout.EntryBundleWidth
		}
		// A partial data tile a full one replaced is read whole: more
		// entries than asked for, the first ones the same.
		if (len(entries) != want && (w == 0 || len(entries) != layout.EntryBundleWidth)) || entries[0].Index != n*layout.EntryBundleWidth {
			return [32]byte{}, fmt.Errorf("ctinclusion: log %s's data tile %d holds %d entries from index %d; want %d from %d",
				logName(log), n, len(entries), entries[0].Index, want, n*layout.EntryBundleWidth)
		}
		hashes = make([]byte, 0, 32*len(entries))
		for i := range entries {
			h, err := entries[i].LeafHash()
			if err != nil {
				return [32]byte{}, fmt.Errorf("ctinclusion: log %s's data tile %d: %w", logName(log), n, err)
			}
			hashes = append(hashes, h[:]...)
		}
		f.tiles.Put(k, hashes)
	}
	var h [32]byte
	copy(h[:], hashes[32*(idx%layout.EntryBundleWidth):])
	return h, nil
}

// auditPath builds the RFC 6962 audit path of leaf idx in a tree of size
// from the log's hash tiles (C2SP tlog-tiles), as Tessera's ProofBuilder
// does; written here so that clients do not link Tessera's client and its
// telemetry.
func (f *Fetcher) auditPath(ctx context.Context, log *loglist.Log, idx, size uint64) ([][32]byte, error) {
	nodes, err := proof.Inclusion(idx, size)
	if err != nil {
		return nil, fmt.Errorf("ctinclusion: audit path of %d in %d: %w", idx, size, err)
	}
	hashes := make([][]byte, 0, len(nodes.IDs))
	for _, id := range nodes.IDs {
		h, err := f.node(ctx, log, id.Level, id.Index, size)
		if err != nil {
			return nil, err
		}
		hashes = append(hashes, h)
	}
	if hashes, err = nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren); err != nil {
		return nil, fmt.Errorf("ctinclusion: audit path of %d in %d: %w", idx, size, err)
	}
	if len(hashes) > MaxProof {
		return nil, fmt.Errorf("ctinclusion: audit path of %d hashes", len(hashes))
	}
	out := make([][32]byte, len(hashes))
	for i, h := range hashes {
		copy(out[i][:], h)
	}
	return out, nil
}

// node returns the hash of the tree node at level and index from the hash
// tile that holds it; a node above a tile's bottom row is the root of the
// 2^k tile hashes under it.
func (f *Fetcher) node(ctx context.Context, log *loglist.Log, level uint, index, size uint64) ([]byte, error) {
	tl, ti, nl, ni := layout.NodeCoordsToTileAddress(uint64(level), index)
	w := layout.PartialTileSize(tl, ti, size)
	k := tileKey{log: log.ID, level: tl, idx: ti, width: w}
	t, ok := f.tiles.Get(k)
	if !ok {
		b, err := f.tile(ctx, log, layout.TilePath(tl, ti, 0), w, maxHashTile)
		if err != nil {
			return nil, err
		}
		want := int(w)
		if w == 0 {
			want = layout.TileWidth
		}
		if len(b) != 32*want {
			return nil, fmt.Errorf("ctinclusion: log %s's hash tile %d/%d is %d bytes; want %d hashes", logName(log), tl, ti, len(b), want)
		}
		t = b
		f.tiles.Put(k, t)
	}
	first, n := ni<<nl, uint64(1)<<nl
	if 32*(first+n) > uint64(len(t)) {
		return nil, fmt.Errorf("ctinclusion: log %s's hash tile %d/%d lacks node %d/%d", logName(log), tl, ti, level, index)
	}
	row := make([][]byte, n)
	for i := range row {
		row[i] = t[32*(first+uint64(i)) : 32*(first+uint64(i)+1)]
	}
	for len(row) > 1 {
		for i := 0; i < len(row)/2; i++ {
			row[i] = rfc6962.DefaultHasher.HashChildren(row[2*i], row[2*i+1])
		}
		row = row[:len(row)/2]
	}
	return row[0], nil
}

// tile fetches a tile at path (without its partial suffix) of width w (0:
// full). A partial tile a full one has replaced is read from the full one
// and cut to width, as tlog-tiles allows.
func (f *Fetcher) tile(ctx context.Context, log *loglist.Log, path string, w uint8, max int64) ([]byte, error) {
	base := strings.TrimSuffix(log.MonitoringURL, "/") + "/" + path
	if w > 0 {
		b, err := f.get(ctx, log, base+".p/"+strconv.Itoa(int(w)), max)
		if !notFound(err) {
			return b, err
		}
		b, err = f.get(ctx, log, base, max)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(path, "tile/data/") {
			return b, nil // the caller checks the entry count; a full data tile is not cut here
		}
		if len(b) < 32*int(w) {
			return nil, fmt.Errorf("ctinclusion: log %s's tile %s is %d bytes, less than its partial width %d", logName(log), path, len(b), w)
		}
		return b[:32*int(w)], nil
	}
	return f.get(ctx, log, base, max)
}

// statusError is a log's answer other than 200 OK.
type statusError struct {
	url, status, body string
	code              int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("GET %s: %s: %s", e.url, e.status, e.body)
}

// notFound reports whether err is a log's 404.
func notFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == http.StatusNotFound
}

// get reads u, at most max bytes, within Timeout. A status other than 200
// is an error wrapping a *statusError, naming the log.
func (f *Fetcher) get(ctx context.Context, log *loglist.Log, u string, max int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(f.Timeout, 10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("ctinclusion: log %s: %w", logName(log), err)
	}
	hc := f.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ctinclusion: log %s: %w", logName(log), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("ctinclusion: log %s: GET %s: %w", logName(log), u, err)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("ctinclusion: log %s: %w", logName(log), &statusError{url: u, status: resp.Status, body: snippet(b), code: resp.StatusCode})
	case int64(len(b)) > max:
		return nil, fmt.Errorf("ctinclusion: log %s: GET %s: more than %d bytes", logName(log), u, max)
	}
	return b, nil
}

func snippet(b []byte) string {
	s := strings.ToValidUTF8(strings.TrimSpace(string(b)), "?")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// getSTH reads an RFC 6962 log's get-sth (§4.3) and returns it as
// MarshalSTH encodes it.
func (f *Fetcher) getSTH(ctx context.Context, log *loglist.Log) ([]byte, error) {
	b, err := f.get(ctx, log, rfc6962URL(log, "get-sth"), maxJSON)
	if err != nil {
		return nil, err
	}
	var r struct {
		TreeSize          uint64 `json:"tree_size"`
		Timestamp         uint64 `json:"timestamp"`
		SHA256RootHash    []byte `json:"sha256_root_hash"`
		TreeHeadSignature []byte `json:"tree_head_signature"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("ctinclusion: log %s: get-sth: %w", logName(log), err)
	}
	if len(r.SHA256RootHash) != 32 {
		return nil, fmt.Errorf("ctinclusion: log %s: get-sth: root hash of %d bytes", logName(log), len(r.SHA256RootHash))
	}
	sth := &STH{TreeSize: r.TreeSize, Timestamp: r.Timestamp, Signature: r.TreeHeadSignature}
	copy(sth.Root[:], r.SHA256RootHash)
	out, err := MarshalSTH(sth)
	if err != nil {
		return nil, fmt.Errorf("ctinclusion: log %s: get-sth: %w", logName(log), err)
	}
	return out, nil
}

func (f *Fetcher) fetchRFC6962(ctx context.Context, log *loglist.Log, s *sct.SCT, leafHash [32]byte) (*Evidence, error) {
	if log.URL == "" {
		return nil, fmt.Errorf("ctinclusion: RFC 6962 log %s has no URL", logName(log))
	}
	// A log that serves both APIs (pkie's does) puts leaf_index in its
	// SCTs; NotYet evidence then names it, as Evidence.For expects.
	idx, _, err := s.LeafIndex()
	if err != nil {
		return nil, fmt.Errorf("ctinclusion: SCT of log %s: leaf_index: %w", logName(log), err)
	}
	// An RFC 6962 SCT does not say where its entry is, so a cached STH
	// that lacks it is fetched again once MinRefresh old.
	h, err := f.head(ctx, log, ^uint64(0))
	if err != nil {
		return nil, err
	}
	e := &Evidence{Status: NotYet, LeafIndex: idx, Checkpoint: h.raw}
	if h.head.size == 0 {
		return e, nil
	}
	q := url.Values{"hash": {base64.StdEncoding.EncodeToString(leafHash[:])}, "tree_size": {strconv.FormatUint(h.head.size, 10)}}
	b, err := f.get(ctx, log, rfc6962URL(log, "get-proof-by-hash")+"?"+q.Encode(), maxJSON)
	if hashNotFound(err) {
		return e, nil
	}
	if err != nil {
		return nil, err
	}
	var r struct {
		LeafIndex *uint64  `json:"leaf_index"`
		AuditPath [][]byte `json:"audit_path"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.LeafIndex == nil {
		return nil, fmt.Errorf("ctinclusion: log %s: get-proof-by-hash: not a proof: %s", logName(log), snippet(b))
	}
	if len(r.AuditPath) > MaxProof {
		return nil, fmt.Errorf("ctinclusion: log %s: get-proof-by-hash: audit path of %d hashes", logName(log), len(r.AuditPath))
	}
	e.Status, e.LeafIndex = Included, *r.LeafIndex
	e.Proof = make([][32]byte, len(r.AuditPath))
	for i, p := range r.AuditPath {
		if len(p) != 32 {
			return nil, fmt.Errorf("ctinclusion: log %s: get-proof-by-hash: audit path hash of %d bytes", logName(log), len(p))
		}
		copy(e.Proof[i][:], p)
	}
	return e, nil
}

// hashNotFound reports whether err is a log's get-proof-by-hash answer
// that it holds no leaf of that hash. RFC 6962 §4.5 leaves the error to
// each log: most answer 404, some 400 with a message saying so. Any other
// 400 (pkie's log answers one when its hash index is full) is a failed
// lookup, not a missing entry.
func hashNotFound(err error) bool {
	var se *statusError
	if !errors.As(err, &se) {
		return false
	}
	if se.code == http.StatusNotFound {
		return true
	}
	msg := strings.ToLower(se.body)
	return se.code == http.StatusBadRequest && (strings.Contains(msg, "not found") || strings.Contains(msg, "no such"))
}

func rfc6962URL(log *loglist.Log, endpoint string) string {
	return strings.TrimSuffix(log.URL, "/") + "/ct/v1/" + endpoint
}
