package oldctlog_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"

	. "github.com/pkie/pkie/internal/oldctlog"
)

// FuzzReadRequest sends arbitrary query strings to the log's read
// endpoints while its storage works: every answer must be 200, 400 or 404
// (never a panic, and never 500, which would blame the log for the
// client's request).
func FuzzReadRequest(f *testing.F) {
	l, _ := filledLog(f, 3)
	if _, err := l.BuildSorted(context.Background()); err != nil {
		f.Fatal(err)
	}
	h := l.Handler(HandlerOptions{})
	paths := []string{"/v1/log/proof/inclusion", "/v1/log/proof/consistency", "/v1/log/entries", "/v1/log/sct", "/v1/sorted/keys"}
	f.Add(uint8(0), "index=1&size=3")
	f.Add(uint8(0), "index=18446744073709551615&size=3")
	f.Add(uint8(1), "first=0&second=4")
	f.Add(uint8(1), "first=2&second=3")
	f.Add(uint8(2), "start=0&end=9223372036854775807")
	f.Add(uint8(2), "start=9223372036854775806&end=9223372036854775807")
	f.Add(uint8(3), "key=00")
	f.Add(uint8(4), "start=0&count=2")
	f.Add(uint8(4), "start=9223372036854775807&count=65536")
	f.Fuzz(func(t *testing.T, which uint8, query string) {
		path := paths[int(which)%len(paths)]
		req := httptest.NewRequest("GET", "http://log/", nil)
		req.URL = &url.URL{Scheme: "http", Host: "log", Path: path, RawQuery: query}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 && rec.Code != 400 && rec.Code != 404 {
			t.Fatalf("%s?%s: %d %s", path, query, rec.Code, rec.Body)
		}
	})
}
