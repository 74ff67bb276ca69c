// Package feed is how a trusted third party that publishes a sorted Merkle
// tree (the CT log's tree of certificate hashes, the revocation authority's
// tree of revoked keys) hands it to provers: its latest signed checkpoint,
// and its 32-byte keys in the order they were first published.
//
// Both trees only grow, so a key's position in publication order never
// changes: a prover that holds the first n keys asks only for keys n and up,
// rebuilds the sorted tree and checks the rebuilt root against the signed
// checkpoint before it serves a single proof. The checkpoint's size is the
// number of keys it covers, and those are exactly the first Size keys of the
// feed.
//
// The wire protocol is two HTTP GETs under a base URL:
//
//	GET {base}/checkpoint              the signed note, text/plain
//	GET {base}/keys?start=S&count=N    N*32 bytes, application/octet-stream
//
// A keys response may hold fewer keys than asked for (at most MaxKeys, and
// none past the end); it never holds a partial key.
package feed

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/httplimit"
)

// MaxKeys bounds one keys response: 65,536 keys are 2 MiB.
const MaxKeys = 1 << 16

// MaxCheckpointBytes bounds a checkpoint response. A checkpoint with one
// signature is under 300 bytes; the slack allows a few cosignatures.
const MaxCheckpointBytes = 16 << 10

// Source is what a trusted third party publishes.
type Source interface {
	// LatestCheckpoint returns the latest signed checkpoint (a signed note).
	LatestCheckpoint(ctx context.Context) ([]byte, error)
	// Keys returns up to count keys starting at position start in
	// publication order; fewer (possibly none) at the end of the feed.
	Keys(ctx context.Context, start uint64, count int) ([][32]byte, error)
}

// ErrNoCheckpoint is returned by a Source that has not signed anything yet.
var ErrNoCheckpoint = errors.New("feed: no checkpoint published yet")

// Handler serves src under the prefix it is mounted at (use
// http.StripPrefix): "/checkpoint" and "/keys".
func Handler(src Source) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /checkpoint", CheckpointHandler(src.LatestCheckpoint))
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		start, count, err := parseKeysQuery(r.URL.Query())
		if err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		keys, err := src.Keys(r.Context(), start, count)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "reading keys failed")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(32*len(keys)))
		buf := make([]byte, 0, 32*len(keys))
		for _, k := range keys {
			buf = append(buf, k[:]...)
		}
		w.Write(buf)
	})
	return httplimit.JSONErrors(mux)
}

// CheckpointHandler serves the signed note latest returns: 404 while
// there is none (ErrNoCheckpoint), 500 when it cannot be read. It is sent
// no-store, since the newest checkpoint changes with every publication and
// a cached one would make a client or auditor believe nothing moved.
func CheckpointHandler(latest func(context.Context) ([]byte, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cp, err := latest(r.Context())
		if errors.Is(err, ErrNoCheckpoint) {
			httpError(w, http.StatusNotFound, err.Error())
			return
		}
		if err != nil {
			httpError(w, http.StatusInternalServerError, "reading the checkpoint failed")
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(cp)
	}
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// parseKeysQuery reads start and count, defaulting count to MaxKeys and
// clamping it there.
func parseKeysQuery(q url.Values) (start uint64, count int, err error) {
	s := q.Get("start")
	if s == "" {
		return 0, 0, errors.New("missing start")
	}
	start, err = strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, 0, fmt.Errorf("start %q is not a non-negative integer", s)
	}
	count = MaxKeys
	if c := q.Get("count"); c != "" {
		n, err := strconv.ParseUint(c, 10, 31)
		if err != nil || n == 0 {
			return 0, 0, fmt.Errorf("count %q is not a positive integer", c)
		}
		count = int(min(n, MaxKeys))
	}
	return start, count, nil
}

// Client reads a feed over HTTP. It implements Source.
type Client struct {
	// Base is the feed's base URL, e.g. "http://127.0.0.1:8080/v1/sorted".
	Base string
	// HTTP is the client to use; nil means http.DefaultClient. Set a
	// timeout on it: the feed is untrusted until the checkpoint verifies.
	HTTP *http.Client
}

func (c *Client) get(ctx context.Context, path string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.Base, "/")+path, nil)
	if err != nil {
		return nil, fmt.Errorf("feed: %w", err)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("feed: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("feed: reading %s: %w", req.URL, err)
	}
	if resp.StatusCode == http.StatusNotFound && path == "/checkpoint" {
		return nil, ErrNoCheckpoint
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("feed: %s: %s: %s", req.URL, resp.Status, strings.TrimSpace(string(body[:min(len(body), 200)])))
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("feed: %s: response larger than %d bytes", req.URL, limit)
	}
	return body, nil
}

// LatestCheckpoint fetches the signed checkpoint. The caller must verify it.
func (c *Client) LatestCheckpoint(ctx context.Context) ([]byte, error) {
	return c.get(ctx, "/checkpoint", MaxCheckpointBytes)
}

// Keys fetches up to count keys from position start.
func (c *Client) Keys(ctx context.Context, start uint64, count int) ([][32]byte, error) {
	count = max(1, min(count, MaxKeys))
	body, err := c.get(ctx, fmt.Sprintf("/keys?start=%d&count=%d", start, count), 32*MaxKeys)
	if err != nil {
		return nil, err
	}
	return DecodeKeys(body, count)
}

// DecodeKeys splits a keys response into keys, rejecting a partial key or
// more than max keys.
func DecodeKeys(body []byte, max int) ([][32]byte, error) {
	if len(body)%32 != 0 {
		return nil, fmt.Errorf("feed: keys response of %d bytes is not a whole number of 32-byte keys", len(body))
	}
	if len(body)/32 > max {
		return nil, fmt.Errorf("feed: keys response holds %d keys, asked for at most %d", len(body)/32, max)
	}
	keys := make([][32]byte, len(body)/32)
	for i := range keys {
		copy(keys[i][:], body[32*i:])
	}
	return keys, nil
}

// maxPrealloc bounds FetchAll's preallocation: 1<<20 keys are 32 MiB.
const maxPrealloc = 1 << 20

// FetchAll reads keys [start, end) from src in MaxKeys batches, calling
// progress (if non-nil) after each batch.
func FetchAll(ctx context.Context, src Source, start, end uint64, progress func(done, total uint64)) ([][32]byte, error) {
	if end < start {
		return nil, fmt.Errorf("feed: end %d before start %d", end, start)
	}
	// end comes from a checkpoint: signed, but not a promise the feed will
	// keep. Preallocating all of it would let one bad size exhaust memory
	// (or panic, beyond what make accepts) before a single key arrived, so
	// preallocate at most maxPrealloc keys and grow as keys really come.
	out := make([][32]byte, 0, min(end-start, maxPrealloc))
	for pos := start; pos < end; {
		keys, err := src.Keys(ctx, pos, int(min(end-pos, MaxKeys)))
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("feed: ends at %d keys, checkpoint promised %d", pos, end)
		}
		out = append(out, keys...)
		pos += uint64(len(keys))
		if progress != nil {
			progress(pos-start, end-start)
		}
	}
	return out, nil
}

// TreeFileHandler serves the published sorted-tree file at path (provers
// that would rather fetch the built tree than rebuild it), or 404 with
// missing as the error while none has been published.
func TreeFileHandler(path, missing string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fail := func(code int, msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(map[string]string{"error": msg})
		}
		f, err := os.Open(path)
		if err != nil {
			fail(http.StatusNotFound, missing)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			fail(http.StatusInternalServerError, "cannot read the tree file")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, filepath.Base(path), fi.ModTime(), f)
	}
}

// Querier is what QueryKeys reads from: a *sql.DB, *sql.Tx or *sql.Conn.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QueryKeys runs query, which must select one 32-byte key column for
// positions [start, end) in publication order given start and end as its two
// arguments, e.g.
//
//	SELECT key FROM certs WHERE seq >= ? AND seq < ? ORDER BY seq
//
// It is how a publisher backed by SQL implements Source.Keys and reads the
// keys it builds its tree from. It allocates room for end-start keys. A
// stored key of any other length is an
// error: the store is corrupt, and a tree built from it would be wrong.
func QueryKeys(ctx context.Context, q Querier, query string, start, end uint64) ([][32]byte, error) {
	if end < start {
		return nil, fmt.Errorf("feed: end %d before start %d", end, start)
	}
	rows, err := q.QueryContext(ctx, query, int64(start), int64(end))
	if err != nil {
		return nil, fmt.Errorf("feed: reading keys: %w", err)
	}
	defer rows.Close()
	// Room for every key asked for: callers pass counts they know (a
	// feed request of at most MaxKeys, a tree build of the stored count),
	// and a tree build of millions of keys should not copy while growing.
	out := make([][32]byte, 0, end-start)
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("feed: reading keys: %w", err)
		}
		if len(b) != 32 {
			return nil, fmt.Errorf("feed: stored key %d is %d bytes, want 32", start+uint64(len(out)), len(b))
		}
		out = append(out, [32]byte(b))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("feed: reading keys: %w", err)
	}
	return out, nil
}

// Every runs fn every interval until ctx ends: how a TTP keeps its signed
// root fresh and a prover keeps in sync. Errors go to logf (if not nil),
// prefixed with what, except those caused by ctx ending.
func Every(ctx context.Context, interval time.Duration, what string, fn func(context.Context) error, logf func(string, ...any)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := fn(ctx); err != nil && ctx.Err() == nil && logf != nil {
				logf("%s: %v", what, err)
			}
		}
	}
}
