package prover_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
)

// TestNonCanonicalPaths checks that the revocation authority and the prover
// (and the log, as the testbed serves them all) answer paths http.ServeMux
// would redirect with the API's JSON error instead of a plain-text
// redirect.
func TestNonCanonicalPaths(t *testing.T) {
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ttp.Close() })
	if err := ttp.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("00", 32)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct {
		base, path string
		code       int
	}{
		{ttp.RevocationURL, "/v1//revocation/checkpoint", 400},
		{ttp.RevocationURL, "/v1/revocation/./checkpoint", 400},
		{ttp.RevocationURL, "/v1/sorted/../sorted/checkpoint", 400},
		{ttp.RevocationURL, "/v1/sorted", 404},
		{ttp.ProverURL, "//v1/ct/proof?key=" + key, 400},
		{ttp.ProverURL, "/v1/revocation/proof/.?key=" + key, 400},
		{ttp.ProverURL, "/./v1/status", 400},
		{ttp.LogURL, "/v1/log/../log/checkpoint", 400},
	} {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := c.Get(tt.base + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct{ Error string }
			err = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != tt.code || err != nil || e.Error == "" || resp.Header.Get("Location") != "" ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q, Location %q, body error %q (%v); want %d with a JSON error",
					resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), e.Error, err, tt.code)
			}
		})
	}
}
