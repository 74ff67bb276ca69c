package revocation

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/internal/httplimit"
)

// HandlerOptions bound the authority's HTTP API.
type HandlerOptions struct {
	// MaxInFlight bounds requests handled at once; beyond it, or beyond a
	// client's share of it, requests get 503 at once. Zero means 64.
	MaxInFlight int
	// MaxPerClient is one client address's share of MaxInFlight
	// (httplimit.ClientKey); zero means a quarter.
	MaxPerClient int
	// Timeout bounds one request; zero means 30s.
	Timeout time.Duration
}

// Handler serves the authority's read-only HTTP API (docs/formats/api-proofs.md)
// with the default HandlerOptions:
//
//	GET /v1/revocation/checkpoint          the latest signed note
//	GET /v1/sorted/checkpoint, /v1/sorted/keys   the feed for provers
//	GET /v1/sorted/tree                    the published tree file
//
// Ingest is not exposed over HTTP: it happens through the directory
// ("pkie revocation add-crl"), where the operator controls access.
func (a *Authority) Handler() http.Handler { return a.HandlerWith(HandlerOptions{}) }

// HandlerWith is Handler bounded by o.
func (a *Authority) HandlerWith(o HandlerOptions) http.Handler {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/revocation/checkpoint", feed.CheckpointHandler(a.Checkpoint))
	mux.Handle("/v1/sorted/", http.StripPrefix("/v1/sorted", feed.Handler(a.Feed())))
	mux.HandleFunc("GET /v1/sorted/tree", feed.TreeFileHandler(filepath.Join(a.dir, TreeFile), "no tree published yet"))
	// Without an exact pattern ServeMux would redirect "/v1/sorted" to
	// "/v1/sorted/".
	mux.HandleFunc("/v1/sorted", func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusNotFound, errors.New("no such endpoint"))
	})
	slots := httplimit.NewSlots(o.MaxInFlight, o.MaxPerClient)
	return httplimit.Handler(httplimit.JSONErrors(mux), httplimit.HandlerOptions{
		Pool:    func(*http.Request) *httplimit.Slots { return slots },
		Timeout: o.Timeout,
	})
}

// Run republishes every interval until ctx ends, so the checkpoint stays
// fresh even when nothing is revoked.
func (a *Authority) Run(ctx context.Context, interval time.Duration, logf func(string, ...any)) {
	feed.Every(ctx, interval, "republishing", func(ctx context.Context) error {
		_, err := a.Publish(ctx)
		return err
	}, logf)
}

func httpError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
