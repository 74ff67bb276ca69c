package httplimit

import (
	"net/http"
)

// JSONErrors serves mux, but answers the requests mux has no handler for
// (unknown paths, 404; known paths with another method, 405 with its Allow
// header) with pkie's JSON error body instead of ServeMux's plain text, so
// that every error of every pkie API is JSON. Redirects to a canonical
// path and every matched request pass through untouched.
func JSONErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			// Through ServeHTTP rather than h, so the request gets its
			// pattern and path values; matching twice costs well under a
			// microsecond.
			mux.ServeHTTP(w, r)
			return
		}
		// Let ServeMux decide 404 or 405 (and the Allow header), then
		// replace its body.
		rec := &statusOnly{header: http.Header{}}
		h.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusNotFound
		}
		switch code {
		case http.StatusNotFound:
			Error(w, code, "no such endpoint: "+r.URL.Path)
		case http.StatusMethodNotAllowed:
			if allow := rec.header.Get("Allow"); allow != "" {
				w.Header().Set("Allow", allow)
			}
			Error(w, code, "method "+r.Method+" not allowed here (allowed: "+rec.header.Get("Allow")+")")
		default:
			// A redirect or anything else ServeMux produces: replay it.
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(code)
		}
	})
}

// statusOnly records a handler's header and status and drops its body.
type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return len(b), nil
}
func (s *statusOnly) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
}
