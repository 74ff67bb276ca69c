package ctmirror

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

// HandlerOptions configure Handler.
type HandlerOptions struct {
	// HealthMaxAge is the head age past which /healthz answers 503: the
	// oldest head clients accept. Zero means one hour.
	HealthMaxAge time.Duration
}

// Handler serves the mirror under whatever prefix the caller mounts it at
// (http.StripPrefix):
//
//	GET head     the last signed head (a signed note), text/plain, no-store
//	GET tree     the tree file it names (sortedtree file format), with
//	             range requests, so auditors and other provers can fetch it
//	GET healthz  200 "ok" while the head is younger than HealthMaxAge
//	             ("ok warming" while the tree's low levels are still being
//	             filled: proofs are right, only slower; see Ready), 503
//	             with the reason otherwise
//
// Before the first build head and tree are 404. The tree file is served
// from the file the head names; a build that replaces it does not cut a
// download in progress short (the old file stays open until it ends).
func (m *Mirror) Handler(o HandlerOptions) http.Handler {
	if o.HealthMaxAge <= 0 {
		o.HealthMaxAge = time.Hour
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /head", func(w http.ResponseWriter, r *http.Request) {
		msg, _ := m.Head()
		if msg == nil {
			http.Error(w, "no tree built yet", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(msg)
	})
	mux.HandleFunc("GET /tree", func(w http.ResponseWriter, r *http.Request) {
		m.mu.RLock()
		path := m.path
		f, err := os.Open(path)
		m.mu.RUnlock()
		if path == "" {
			http.Error(w, "no tree built yet", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, "tree file unavailable", http.StatusServiceUnavailable)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			http.Error(w, "tree file unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Cache-Control", "no-store")
		http.ServeContent(w, r, "", st.ModTime(), f)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := m.Health(o.HealthMaxAge); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		select {
		case <-m.Ready():
			w.Write([]byte("ok\n"))
		default:
			w.Write([]byte("ok warming\n"))
		}
	})
	return mux
}

// Health reports a mirror with no tree, or whose head is older than
// maxAge.
func (m *Mirror) Health(maxAge time.Duration) error {
	_, h := m.Head()
	if h == nil {
		return ErrNoTree
	}
	if age := m.c.Now().Sub(h.Time); age > maxAge {
		return fmt.Errorf("ctmirror: head signed %s is %s old, over %s", h.Time.UTC().Format(time.RFC3339), age.Round(time.Second), maxAge)
	}
	return nil
}
