package oldctlog_test

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	. "github.com/pkie/pkie/internal/oldctlog"
)

// TestReadEndpointStatuses checks that the proof and entries endpoints
// answer 400 only for requests outside the log and 500 when the log itself
// fails (here: its database is closed), and that add-chain tells an
// oversized body from one that could not be read.
func TestReadEndpointStatuses(t *testing.T) {
	l, _ := filledLog(t, 3)
	h := l.Handler(HandlerOptions{})
	do := func(method, target string, body io.Reader) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, target, body))
		return rec
	}
	for _, tt := range []struct {
		name   string
		method string
		target string
		body   io.Reader
		close  bool // close the log's database first
		code   int
		want   string
	}{
		{"inclusion ok", "GET", "/v1/log/proof/inclusion?index=0&size=3", nil, false, 200, `"hashes"`},
		{"inclusion index past size", "GET", "/v1/log/proof/inclusion?index=3&size=3", nil, false, 400, "error"},
		{"inclusion size past log", "GET", "/v1/log/proof/inclusion?index=0&size=4", nil, false, 400, "beyond the log"},
		{"inclusion bad index", "GET", "/v1/log/proof/inclusion?index=-1&size=3", nil, false, 400, "index"},
		{"consistency ok", "GET", "/v1/log/proof/consistency?first=1&second=3", nil, false, 200, `"hashes"`},
		{"consistency reversed", "GET", "/v1/log/proof/consistency?first=3&second=1", nil, false, 400, "error"},
		{"consistency past log", "GET", "/v1/log/proof/consistency?first=1&second=9", nil, false, 400, "beyond the log"},
		{"entries ok", "GET", "/v1/log/entries?start=0&end=3", nil, false, 200, `"leaf_input"`},
		{"entries empty range", "GET", "/v1/log/entries?start=2&end=2", nil, false, 400, "empty range"},
		{"entries past the end", "GET", "/v1/log/entries?start=3&end=9", nil, false, 200, `{"entries":[]}`},
		{"checkpoint", "GET", "/v1/log/checkpoint", nil, false, 200, "pkie.test"},
		{"entries huge start", "GET", "/v1/log/entries?start=9223372036854775807&end=9223372036854775807", nil, false, 400, "empty range"},
		{"add-chain too big", "POST", "/v1/log/add-chain", bytes.NewReader(make([]byte, MaxAddChainBytes+1)), false, 413, "over"},
		{"add-chain body cut short", "POST", "/v1/log/add-chain",
			io.MultiReader(strings.NewReader(`{"chain":[`), iotest.ErrReader(io.ErrUnexpectedEOF)), false, 400, "reading the request body"},
		{"inclusion, log failing", "GET", "/v1/log/proof/inclusion?index=0&size=3", nil, true, 500, "error"},
		{"consistency, log failing", "GET", "/v1/log/proof/consistency?first=1&second=3", nil, true, 500, "error"},
		{"entries, log failing", "GET", "/v1/log/entries?start=0&end=3", nil, true, 500, "error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.close {
				l.Close()
			}
			rec := do(tt.method, tt.target, tt.body)
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.want) {
				t.Errorf("%s %s: %d %s, want %d with %q", tt.method, tt.target, rec.Code, rec.Body, tt.code, tt.want)
			}
			if strings.HasSuffix(tt.target, "/checkpoint") && rec.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("checkpoint Cache-Control %q, want no-store", rec.Header().Get("Cache-Control"))
			}
		})
	}
}
