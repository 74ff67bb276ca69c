package httplimit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestJSONErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/thing", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("thing")) })
	mux.HandleFunc("/dir/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("dir")) })
	h := JSONErrors(mux)
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
		json         bool
	}{
		{"GET", "/v1/thing", 200, "", false},
		{"GET", "/nope", 404, "", true},
		{"POST", "/v1/thing", 405, "GET, HEAD", true},
		{"GET", "/dir", -1, "", false}, // ServeMux's own redirect, whatever its code
		{"GET", "/dir/x", 200, "", false},
	} {
		if tc.code < 0 {
			plain := httptest.NewRecorder()
			mux.ServeHTTP(plain, httptest.NewRequest(tc.method, tc.path, nil))
			tc.code = plain.Code
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.code || rec.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d, Allow %q; want %d, %q", tc.method, tc.path, rec.Code, rec.Header().Get("Allow"), tc.code, tc.allow)
		}
		var body struct{ Error string }
		isJSON := rec.Header().Get("Content-Type") == "application/json" && json.Unmarshal(rec.Body.Bytes(), &body) == nil && body.Error != ""
		if isJSON != tc.json {
			t.Errorf("%s %s: JSON error body %v, want %v: %q", tc.method, tc.path, isJSON, tc.json, rec.Body.String())
		}
	}
}
