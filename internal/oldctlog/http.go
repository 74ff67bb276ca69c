package oldctlog

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/internal/httplimit"
)

// MaxAddChainBytes bounds an add-chain request body.
const MaxAddChainBytes = 1 << 20

// HandlerOptions bound the log's HTTP API. Beyond a pool or a client's
// share of it requests get 503 at once.
type HandlerOptions struct {
	// MaxInFlight bounds read requests (checkpoint, proofs, entries, SCTs,
	// the sorted feed and tree) handled at once; zero means 64.
	MaxInFlight int
	// MaxAddChain bounds add-chain requests handled at once, in a pool of
	// their own: submissions, slow or many, must not stop provers syncing
	// and clients reading. Zero means 64.
	MaxAddChain int
	// MaxPerClient is one client address's share of each pool
	// (httplimit.ClientKey); zero means a quarter of the pool.
	MaxPerClient int
	// Timeout bounds one request; zero means 30s.
	Timeout time.Duration
	// BodyTimeout is how long a request body may take to arrive (see
	// httplimit.HandlerOptions); zero means httplimit.DefaultBodyTimeout.
	BodyTimeout time.Duration
}

// Handler serves the log's HTTP API (docs/formats/api-proofs.md):
//
//	POST /v1/log/add-chain                      {"chain": [base64 DER, ...]} or PEM
//	GET  /v1/log/checkpoint                     signed note
//	GET  /v1/log/proof/inclusion?index=I&size=N {"index","size","hashes"}
//	GET  /v1/log/proof/consistency?first=M&second=N {"hashes"}
//	GET  /v1/log/entries?start=S&end=E          {"entries": [...]}
//	GET  /v1/log/sct?key=HEX                    {"index","sct"}
//	GET  /v1/sorted/checkpoint, /v1/sorted/keys (package feed)
//	GET  /v1/sorted/tree                        the published sorted tree file
func (l *Log) Handler(o HandlerOptions) http.Handler {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.MaxAddChain <= 0 {
		o.MaxAddChain = 64
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/log/add-chain", l.handleAddChain)
	mux.HandleFunc("GET /v1/log/checkpoint", feed.CheckpointHandler(l.Checkpoint))
	mux.HandleFunc("GET /v1/log/proof/inclusion", func(w http.ResponseWriter, r *http.Request) {
		idx, err1 := queryUint(r, "index")
		size, err2 := queryUint(r, "size")
		if err := errors.Join(err1, err2); err != nil {
			httpError(w, http.StatusBadRequest, err)
			return
		}
		p, err := l.InclusionProof(r.Context(), idx, size)
		if err != nil {
			httpError(w, readStatus(err), err)
			return
		}
		writeJSON(w, map[string]any{"index": idx, "size": size, "hashes": p})
	})
	mux.HandleFunc("GET /v1/log/proof/consistency", func(w http.ResponseWriter, r *http.Request) {
		a, err1 := queryUint(r, "first")
		b, err2 := queryUint(r, "second")
		if err := errors.Join(err1, err2); err != nil {
			httpError(w, http.StatusBadRequest, err)
			return
		}
		p, err := l.ConsistencyProof(r.Context(), a, b)
		if err != nil {
			httpError(w, readStatus(err), err)
			return
		}
		writeJSON(w, map[string]any{"first": a, "second": b, "hashes": p})
	})
	mux.HandleFunc("GET /v1/log/entries", l.handleEntries)
	mux.HandleFunc("GET /v1/log/sct", func(w http.ResponseWriter, r *http.Request) {
		var key [32]byte
		s := r.URL.Query().Get("key")
		if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
			httpError(w, http.StatusBadRequest, fmt.Errorf("key must be 64 hex digits"))
			return
		} else {
			copy(key[:], b)
		}
		sct, idx, ok, err := l.LookupSCT(r.Context(), key)
		if err != nil {
			httpError(w, http.StatusInternalServerError, err)
			return
		}
		if !ok {
			httpError(w, http.StatusNotFound, errors.New("certificate not logged"))
			return
		}
		writeJSON(w, map[string]any{"index": idx, "sct": sct})
	})
	mux.Handle("/v1/sorted/", http.StripPrefix("/v1/sorted", feed.Handler(l.Feed())))
	mux.HandleFunc("GET /v1/sorted/tree", feed.TreeFileHandler(filepath.Join(l.dir, SortedTreeFile), "no sorted tree built yet"))
	// Without an exact pattern ServeMux would redirect "/v1/sorted" to
	// "/v1/sorted/".
	mux.HandleFunc("/v1/sorted", func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusNotFound, errors.New("no such endpoint"))
	})
	reads := httplimit.NewSlots(o.MaxInFlight, o.MaxPerClient)
	writes := httplimit.NewSlots(o.MaxAddChain, o.MaxPerClient)
	return httplimit.Handler(httplimit.JSONErrors(mux), httplimit.HandlerOptions{
		Pool: func(r *http.Request) *httplimit.Slots {
			if r.URL.Path == "/v1/log/add-chain" {
				return writes
			}
			return reads
		},
		Timeout:     o.Timeout,
		BodyTimeout: o.BodyTimeout,
	})
}

// handleEntries answers one page of entries (Log.Entries bounds it by count
// and bytes). The page is encoded one entry at a time as it is written, so a
// request holds the page as read and one entry's JSON, never the whole
// answer twice.
func (l *Log) handleEntries(w http.ResponseWriter, r *http.Request) {
	a, err1 := queryUint(r, "start")
	b, err2 := queryUint(r, "end")
	if err := errors.Join(err1, err2); err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	es, err := l.Entries(r.Context(), a, b)
	if err != nil {
		httpError(w, readStatus(err), err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"entries":[`) // past the end: none yet, as an empty list
	enc := json.NewEncoder(bw)
	for i := range es {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := enc.Encode(&es[i]); err != nil {
			return // the client went away; nothing more to tell it
		}
		es[i] = Entry{} // let the written entry go
	}
	bw.WriteString("]}\n")
	bw.Flush()
}

func (l *Log) handleAddChain(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxAddChainBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		httpError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", MaxAddChainBytes))
		return
	case err != nil:
		// A body cut short or sent too slowly is not an oversized one.
		httpError(w, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err))
		return
	}
	chain, err := ParseAddChainRequest(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	res, err := l.AddChain(r.Context(), chain)
	var rejected *RejectedError
	switch {
	case errors.As(err, &rejected):
		httpError(w, http.StatusBadRequest, err)
		return
	case err != nil:
		// The log's own failure (storage, signing), not the client's.
		httpError(w, http.StatusInternalServerError, fmt.Errorf("the log could not record the chain: %w", err))
		return
	}
	writeJSON(w, AddChainResponse{Index: res.Index, Key: hex.EncodeToString(res.Key[:]), SCT: res.SCT, Duplicate: res.Duplicate})
}

// AddChainResponse is the answer to add-chain.
type AddChainResponse struct {
	Index     uint64 `json:"index"`
	Key       string `json:"key"`
	SCT       *SCT   `json:"sct"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// ParseAddChainRequest reads an add-chain body: JSON {"chain": [base64
// DER, ...]} (RFC 6962's add-chain), PEM, or one DER certificate.
func ParseAddChainRequest(body []byte) ([][]byte, error) {
	t := strings.TrimSpace(string(body[:min(len(body), 16)]))
	if strings.HasPrefix(t, "{") {
		var req struct {
			Chain []string `json:"chain"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("ctlog: malformed add-chain JSON: %w", err)
		}
		if len(req.Chain) == 0 {
			return nil, errors.New("ctlog: add-chain JSON has an empty chain")
		}
		if len(req.Chain) > MaxChainCerts {
			return nil, fmt.Errorf("ctlog: chain of %d certificates, at most %d accepted", len(req.Chain), MaxChainCerts)
		}
		chain := make([][]byte, len(req.Chain))
		for i, s := range req.Chain {
			der, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, fmt.Errorf("ctlog: chain[%d] is not base64: %w", i, err)
			}
			chain[i] = der
		}
		return chain, nil
	}
	return ParseChain(body)
}

// readStatus maps a read endpoint's error to its status: a request outside
// the log is the client's error, anything else (storage) the log's.
func readStatus(err error) int {
	var re *RangeError
	if errors.As(err, &re) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
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

func httpError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// NewHTTPServer wraps h with the timeouts every pkie server uses. Serve it
// on a listener from httplimit.Listen, which caps connections.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
}
