package revocation

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/internal/feed"
)

// Handler serves the authority's read-only HTTP API (docs/api-proofs.md):
//
//	GET /v1/revocation/checkpoint          the latest signed note
//	GET /v1/sorted/checkpoint, /v1/sorted/keys   the feed for provers
//	GET /v1/sorted/tree                    the published tree file
//
// Ingest is not exposed over HTTP: it happens through the directory
// ("pkie revocation add-crl"), where the operator controls access.
func (a *Authority) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/revocation/checkpoint", feed.CheckpointHandler(a.Checkpoint))
	mux.Handle("/v1/sorted/", http.StripPrefix("/v1/sorted", feed.Handler(a.Feed())))
	mux.HandleFunc("GET /v1/sorted/tree", feed.TreeFileHandler(filepath.Join(a.dir, TreeFile), "no tree published yet"))
	sem := make(chan struct{}, 64)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		default:
			httpError(w, http.StatusServiceUnavailable, errors.New("too many requests in flight"))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		mux.ServeHTTP(w, r.WithContext(ctx))
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
