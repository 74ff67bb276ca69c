package notary_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/notarywire"
)

// FuzzV1Request feeds arbitrary bodies to the v1 check endpoint. Its
// prober resolves nothing and bodies pinning an IP are skipped, so no
// request makes network traffic; the
// handler must answer, never panic, and blame a bad request on the client
// (4xx) or an unreachable target (503), never on itself (500).
func FuzzV1Request(f *testing.F) {
	handler := offlineNotary(f)
	for _, s := range []string{
		`{"host":"example.com","port":443}`,
		`{"host":"example.com","port":443,"sha256":"` + strings.Repeat("ab", 32) + `"}`,
		`{"host":"example.com","port":443,"sni":"a..b"}`,
		`{"host":"","port":1e400}`,
		`{"host":"a","port":1} {}`,
		`null`, `[]`, ``,
	} {
		f.Add(s)
	}
	allowed := map[int]bool{400: true, 403: true, 413: true, 503: true}
	f.Fuzz(func(t *testing.T, body string) {
		// A pinned IP bypasses the prober's Lookup and would be dialled:
		// skip any body the handler would read one from (decoded as the
		// handler decodes it), so fuzzing never leaves the machine.
		var peek notarywire.Request
		if json.NewDecoder(strings.NewReader(body)).Decode(&peek) == nil && peek.IP != "" {
			return
		}
		req := httptest.NewRequest("POST", "https://notary/v1/check", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("%q: status %d %s", body, rec.Code, rec.Body)
		}
		if !strings.Contains(rec.Body.String(), `"error"`) {
			t.Fatalf("%q: status %d without an error body: %s", body, rec.Code, rec.Body)
		}
	})
}
