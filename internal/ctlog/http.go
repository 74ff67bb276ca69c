package ctlog

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	ct "github.com/google/certificate-transparency-go"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
	"golang.org/x/crypto/cryptobyte"

	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/httplimit"
)

// Bounds of the HTTP API (docs/operations/security.md).
const (
	// MaxAddChainBytes bounds an add-chain or add-pre-chain body: ten
	// certificates of 64 KiB, base64-encoded, fit.
	MaxAddChainBytes = 1 << 20
	// MaxEntries and MaxEntriesPageBytes bound one get-entries answer:
	// it stops at whichever comes first; clients page on.
	MaxEntries          = 1000
	MaxEntriesPageBytes = 1 << 20
)

// HandlerOptions bound the log's HTTP API. Beyond a pool, or a client's
// share of it, requests get 503 at once.
type HandlerOptions struct {
	// MaxInFlight bounds read requests (checkpoint, tiles, issuers, the
	// RFC 6962 read API, the extension) handled at once; zero means 64.
	MaxInFlight int
	// MaxAddChain bounds add-chain and add-pre-chain requests handled at
	// once, in a pool of their own, so that submissions, slow or many,
	// never stop monitors and mirrors reading. Zero means 64.
	MaxAddChain int
	// MaxPerClient is one client address's share of each pool
	// (httplimit.ClientKey); zero means a quarter of the pool.
	MaxPerClient int
	// Timeout bounds one request; zero means 30s.
	Timeout time.Duration
	// BodyTimeout is how long a request body may take to arrive (see
	// httplimit.HandlerOptions); zero means httplimit.DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Extension, if set, serves every request under /pkie/ (path
	// unchanged), in the read pool: pkie's sorted tree of the log's
	// certificates, which is not part of the log.
	Extension http.Handler
}

// Handler serves the log (docs/formats/ct-log.md):
//
//	POST /ct/v1/add-chain, /ct/v1/add-pre-chain   RFC 6962 §4.1, §4.2
//	GET  /ct/v1/get-roots                          RFC 6962 §4.7
//	GET  /ct/v1/get-sth, get-sth-consistency, get-proof-by-hash, get-entries
//	GET  /checkpoint, /tile/<L>/<N>[.p/<W>], /tile/data/<N>[.p/<W>], /issuer/<hex>
//	                                               C2SP static-ct-api
//	GET  /healthz                                  outside every pool
//	     /pkie/...                                 HandlerOptions.Extension
func (l *Log) Handler(o HandlerOptions) http.Handler {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.MaxAddChain <= 0 {
		o.MaxAddChain = 64
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ct/v1/add-chain", func(w http.ResponseWriter, r *http.Request) { l.serveAddChain(w, r, false) })
	mux.HandleFunc("POST /ct/v1/add-pre-chain", func(w http.ResponseWriter, r *http.Request) { l.serveAddChain(w, r, true) })
	mux.HandleFunc("GET /ct/v1/get-roots", func(w http.ResponseWriter, r *http.Request) {
		res := ct.GetRootsResponse{Certificates: make([]string, len(l.roots.der))}
		for i, d := range l.roots.der {
			res.Certificates[i] = base64.StdEncoding.EncodeToString(d)
		}
		writeJSON(w, res)
	})
	mux.HandleFunc("GET /ct/v1/get-sth", l.serveSTH)
	mux.HandleFunc("GET /ct/v1/get-sth-consistency", l.serveConsistency)
	mux.HandleFunc("GET /ct/v1/get-proof-by-hash", l.serveProofByHash)
	mux.HandleFunc("GET /ct/v1/get-entries", l.serveEntries)
	mux.HandleFunc("GET /checkpoint", func(w http.ResponseWriter, r *http.Request) {
		b, err := l.reader.ReadCheckpoint(r.Context())
		if err != nil {
			staticError(w, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		// Mutable: tlog-tiles asks that it not be cached beyond seconds.
		w.Header().Set("Cache-Control", "public, max-age=5")
		w.Write(b)
	})
	mux.HandleFunc("GET /tile/", func(w http.ResponseWriter, r *http.Request) {
		t, err := ParseTilePath(strings.TrimPrefix(r.URL.Path, "/"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var b []byte
		if t.Data {
			b, err = l.readBundle(r.Context(), t.Index, t.Width)
		} else {
			b, err = l.readTile(r.Context(), t.Level, t.Index, t.Width)
		}
		if err != nil {
			staticError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		// A tile, full or partial, never changes at its URL.
		w.Header().Set("Cache-Control", "public, max-age=604800, immutable")
		w.Write(b)
	})
	mux.HandleFunc("GET /issuer/{fp}", func(w http.ResponseWriter, r *http.Request) {
		var fp [32]byte
		if s := r.PathValue("fp"); len(s) != 64 || strings.ToLower(s) != s {
			http.Error(w, "an issuer is named by 64 lower-case hex digits (its SHA-256)", http.StatusBadRequest)
			return
		} else if _, err := hex.Decode(fp[:], []byte(s)); err != nil {
			http.Error(w, "an issuer is named by 64 lower-case hex digits (its SHA-256)", http.StatusBadRequest)
			return
		}
		b, err := l.issuers.lookup(r.Context(), fp)
		if err != nil {
			staticError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/pkix-cert")
		w.Header().Set("Cache-Control", "public, max-age=604800, immutable")
		w.Write(b)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := l.latest(r.Context()); err != nil {
			http.Error(w, "unhealthy: cannot read the log's checkpoint", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	if o.Extension != nil {
		mux.Handle("/pkie/", o.Extension)
	}
	reads := httplimit.NewSlots(o.MaxInFlight, o.MaxPerClient)
	writes := httplimit.NewSlots(o.MaxAddChain, o.MaxPerClient)
	return httplimit.Handler(httplimit.JSONErrors(mux), httplimit.HandlerOptions{
		Pool: func(r *http.Request) *httplimit.Slots {
			switch r.URL.Path {
			case "/ct/v1/add-chain", "/ct/v1/add-pre-chain":
				return writes
			case "/healthz":
				return nil
			}
			return reads
		},
		Timeout:     o.Timeout,
		BodyTimeout: o.BodyTimeout,
	})
}

// staticError answers a failed read of the static API: 404 for what is
// not there, 500 (with no detail) for a storage failure.
func staticError(w http.ResponseWriter, err error) {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	http.Error(w, "the log could not read its storage", http.StatusInternalServerError)
}

// TilePath is a parsed tlog-tiles path.
type TilePath struct {
	Data         bool // a data tile (tile/data/...): Level is 0
	Level, Index uint64
	Width        uint8 // partial width, 0 for a full tile
}

// ParseTilePath parses "tile/<L>/<N>[.p/<W>]" or "tile/data/<N>[.p/<W>]"
// and accepts only the canonical encoding tlog-tiles defines (so that no
// two URLs name one tile and nothing else, such as "..", gets through).
func ParseTilePath(p string) (TilePath, error) {
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return TilePath{}, errors.New("not a tile path")
	}
	var t TilePath
	var idx string
	if r, ok := strings.CutPrefix(rest, "data/"); ok {
		t.Data, idx = true, r
	} else {
		lv, r, ok := strings.Cut(rest, "/")
		if !ok {
			return TilePath{}, errors.New("malformed tile path")
		}
		var err error
		if t.Level, err = layout.ParseTileLevel(lv); err != nil {
			return TilePath{}, errors.New("malformed tile level")
		}
		idx = r
	}
	i, w, err := layout.ParseTileIndexPartial(idx)
	if err != nil {
		return TilePath{}, errors.New("malformed tile index")
	}
	t.Index, t.Width = i, w
	canon := layout.TilePath(t.Level, t.Index, t.Width)
	if t.Data {
		canon = "tile/data/" + layout.NWithSuffix(0, t.Index, t.Width)
	}
	if canon != p {
		return TilePath{}, errors.New("tile path not in canonical form")
	}
	return t, nil
}

func (l *Log) serveAddChain(w http.ResponseWriter, r *http.Request, precert bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxAddChainBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		ctError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxAddChainBytes))
		return
	case err != nil:
		ctError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	chain, err := ParseAddChainRequest(body)
	if err != nil {
		ctError(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := l.AddChain(r.Context(), chain, precert)
	var rejected *RejectedError
	switch {
	case errors.As(err, &rejected):
		ctError(w, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", "1")
		ctError(w, http.StatusServiceUnavailable, ErrBusy.Error())
		return
	case err != nil:
		// The log's own failure (storage, signing), not the client's; the
		// detail is the operator's.
		ctError(w, http.StatusInternalServerError, "the log could not record the chain")
		return
	}
	writeJSON(w, res.JSON())
}

// ParseAddChainRequest reads an RFC 6962 add-chain or add-pre-chain body,
// {"chain": [base64 DER, ...]}, leaf first.
func ParseAddChainRequest(body []byte) ([][]byte, error) {
	var req ct.AddChainRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("ctlog: malformed add-chain JSON: %v", err)
	}
	if dec.More() {
		return nil, errors.New("ctlog: data after the add-chain JSON object")
	}
	switch {
	case len(req.Chain) == 0:
		return nil, errors.New(`ctlog: add-chain JSON has no "chain" or an empty one`)
	case len(req.Chain) > MaxChainCerts:
		return nil, fmt.Errorf("ctlog: chain of %d certificates, at most %d accepted", len(req.Chain), MaxChainCerts)
	}
	return req.Chain, nil
}

func (l *Log) serveSTH(w http.ResponseWriter, r *http.Request) {
	cp, n, err := l.latest(r.Context())
	if err != nil {
		ctError(w, http.StatusInternalServerError, "the log could not read its checkpoint")
		return
	}
	ts, sig, err := noteSignature(n)
	if err != nil {
		ctError(w, http.StatusInternalServerError, "the log could not read its checkpoint")
		return
	}
	writeJSON(w, ct.GetSTHResponse{TreeSize: cp.Size, Timestamp: ts, SHA256RootHash: cp.Hash, TreeHeadSignature: sig})
}

func (l *Log) serveConsistency(w http.ResponseWriter, r *http.Request) {
	first, err1 := queryUint(r, "first")
	second, err2 := queryUint(r, "second")
	if err := errors.Join(err1, err2); err != nil {
		ctError(w, http.StatusBadRequest, err.Error())
		return
	}
	cp, _, err := l.latest(r.Context())
	if err != nil {
		ctError(w, http.StatusInternalServerError, "the log could not read its checkpoint")
		return
	}
	if first > second || second > cp.Size {
		ctError(w, http.StatusBadRequest, fmt.Sprintf("want 0 <= first <= second <= %d (the tree size)", cp.Size))
		return
	}
	res := ct.GetSTHConsistencyResponse{Consistency: [][]byte{}}
	if first > 0 && first < second {
		pb, err := client.NewProofBuilder(r.Context(), second, l.readTile)
		if err == nil {
			res.Consistency, err = pb.ConsistencyProof(r.Context(), first, second)
		}
		if err != nil {
			ctError(w, http.StatusInternalServerError, "the log could not read its tree")
			return
		}
	}
	writeJSON(w, res)
}

func (l *Log) serveProofByHash(w http.ResponseWriter, r *http.Request) {
	size, err := queryUint(r, "tree_size")
	if err != nil {
		ctError(w, http.StatusBadRequest, err.Error())
		return
	}
	var hash [32]byte
	if h, err := base64.StdEncoding.DecodeString(r.URL.Query().Get("hash")); err != nil || len(h) != 32 {
		ctError(w, http.StatusBadRequest, "hash must be a base64 SHA-256 leaf hash")
		return
	} else {
		copy(hash[:], h)
	}
	cp, _, err := l.latest(r.Context())
	if err != nil {
		ctError(w, http.StatusInternalServerError, "the log could not read its checkpoint")
		return
	}
	if size == 0 || size > cp.Size {
		ctError(w, http.StatusBadRequest, fmt.Sprintf("tree_size must be between 1 and %d (the tree size)", cp.Size))
		return
	}
	i, ok, err := l.hashes.lookup(r.Context(), l, size, hash)
	switch {
	case errors.Is(err, errHashIndexFull):
		ctError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		ctError(w, http.StatusInternalServerError, "the log could not read its tree")
		return
	case !ok:
		ctError(w, http.StatusNotFound, fmt.Sprintf("no leaf with that hash in the tree of %d", size))
		return
	}
	pb, err := client.NewProofBuilder(r.Context(), size, l.readTile)
	var p [][]byte
	if err == nil {
		p, err = pb.InclusionProof(r.Context(), i)
	}
	if err != nil {
		ctError(w, http.StatusInternalServerError, "the log could not read its tree")
		return
	}
	if p == nil {
		p = [][]byte{}
	}
	writeJSON(w, ct.GetProofByHashResponse{LeafIndex: int64(i), AuditPath: p})
}

// serveEntries answers get-entries, at most MaxEntries entries or
// MaxEntriesPageBytes of leaves and chains, streamed.
func (l *Log) serveEntries(w http.ResponseWriter, r *http.Request) {
	start, err1 := queryUint(r, "start")
	end, err2 := queryUint(r, "end")
	if err := errors.Join(err1, err2); err != nil {
		ctError(w, http.StatusBadRequest, err.Error())
		return
	}
	cp, _, err := l.latest(r.Context())
	if err != nil {
		ctError(w, http.StatusInternalServerError, "the log could not read its checkpoint")
		return
	}
	if start > end || start >= cp.Size {
		ctError(w, http.StatusBadRequest, fmt.Sprintf("want start <= end and start < %d (the tree size)", cp.Size))
		return
	}
	end = min(end, cp.Size-1, start+MaxEntries-1)
	var out []ct.LeafEntry
	bytes := 0
	for i := start; i <= end && (bytes < MaxEntriesPageBytes || len(out) == 0); {
		t := i / layout.EntryBundleWidth
		b, err := l.readBundle(r.Context(), t, layout.PartialTileSize(0, t, cp.Size))
		var es []ctwire.Entry
		if err == nil {
			es, err = ctwire.ParseDataTile(b)
		}
		if err != nil {
			ctError(w, http.StatusInternalServerError, "the log could not read its entries")
			return
		}
		for ; i <= end && i/layout.EntryBundleWidth == t && (bytes < MaxEntriesPageBytes || len(out) == 0); i++ {
			j := i % layout.EntryBundleWidth
			if j >= uint64(len(es)) {
				ctError(w, http.StatusInternalServerError, "the log could not read its entries")
				return
			}
			extra, err := l.extraData(r, &es[j])
			if err != nil {
				ctError(w, http.StatusInternalServerError, "the log could not read an entry's issuers")
				return
			}
			leaf, err := es[j].MerkleTreeLeaf()
			if err != nil {
				ctError(w, http.StatusInternalServerError, "the log could not read its entries")
				return
			}
			e := ct.LeafEntry{LeafInput: leaf, ExtraData: extra}
			bytes += len(e.LeafInput) + len(e.ExtraData)
			out = append(out, e)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"entries":[`)
	enc := json.NewEncoder(bw)
	for i := range out {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := enc.Encode(&out[i]); err != nil {
			return
		}
		out[i] = ct.LeafEntry{}
	}
	bw.WriteString("]}\n")
	bw.Flush()
}

// extraData is RFC 6962 §4.6's extra_data: the certificate chain of an
// x509 entry, or the PrecertChainEntry of a precert entry.
func (l *Log) extraData(r *http.Request, e *ctwire.Entry) ([]byte, error) {
	b := cryptobyte.NewBuilder(nil)
	if e.Precert {
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(e.Precertificate) })
	}
	var ferr error
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, fp := range e.ChainFingerprints {
			der, err := l.issuers.lookup(r.Context(), fp)
			if err != nil {
				ferr = err
				return
			}
			b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(der) })
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	return b.Bytes()
}

func queryUint(r *http.Request, name string) (uint64, error) {
	s := r.URL.Query().Get(name)
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a non-negative integer", name, s)
	}
	return n, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// ctError answers an RFC 6962 endpoint's error with a JSON body
// {"success": false, "error_message": "..."}.
func ctError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"success": false, "error_message": msg})
}

// NewHTTPServer wraps h with the timeouts every pkie server uses. Serve it
// on a listener from httplimit.Listen, which caps connections.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
}
