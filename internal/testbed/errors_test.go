package testbed_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

// TestEveryAPIErrorIsJSON asks each of pkie's HTTP services, as it really
// serves, for a path it does not have and for a path with a method it does
// not take: every answer must be pkie's JSON error, as docs/formats/api.md and
// docs/formats/api-proofs.md promise, not ServeMux's plain text.
func TestEveryAPIErrorIsJSON(t *testing.T) {
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "n", Path: testbed.NewResolver()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	notaryURL := "https://" + n.Addr.String()
	for _, tc := range []struct {
		service, method, url string
		code                 int
	}{
		{"notary", "GET", notaryURL + "/nope", 404},
		{"notary", "DELETE", notaryURL + "/v1/check", 405},
		{"log", "GET", ttp.LogURL + "/nope", 404},
		{"log", "GET", ttp.LogURL + "/ct/v1/add-chain", 405},
		{"log", "POST", ttp.LogURL + "/ct/v1/get-sth", 405},
		{"log", "GET", ttp.LogURL + "/ct/v1/nope", 404},
		{"revocation", "GET", ttp.RevocationURL + "/nope", 404},
		{"revocation", "POST", ttp.RevocationURL + "/v1/revocation/checkpoint", 405},
		{"prover", "GET", ttp.ProverURL + "/nope", 404},
		{"prover", "POST", ttp.ProverURL + "/v1/status", 405},
	} {
		t.Run(tc.service+" "+tc.method+" "+tc.url[strings.LastIndex(tc.url, "/"):], func(t *testing.T) {
			req, _ := http.NewRequestWithContext(context.Background(), tc.method, tc.url, nil)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var body struct{ Error string }
			if resp.StatusCode != tc.code || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &body) != nil || body.Error == "" {
				t.Fatalf("%s %s: %d %s %q, want %d and a JSON error", tc.method, tc.url, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.code)
			}
		})
	}
}

// TestStartTTPsError: a log that cannot be created is an error, and the
// half-built TTPs are cleaned up rather than panicking on a nil receiver.
func TestStartTTPsError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: file})
	if err == nil {
		ttp.Close()
		t.Fatal("TTPs started under a regular file")
	}
	if ttp != nil {
		t.Errorf("StartTTPs returned %v with error %v", ttp, err)
	}
}
