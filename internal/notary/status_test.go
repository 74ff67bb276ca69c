package notary_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/notary"
)

// postTo posts body to the world's notary at path and returns the status
// and the body of the answer.
func postTo(t *testing.T, w *world, path, ctype, body string) (int, string) {
	t.Helper()
	resp, err := w.client.Post("https://"+w.notary.Addr.String()+path, ctype, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStorageFailureIs500 checks that when the target answers but the
// notary cannot record what it saw, both APIs report the notary's own
// failure (500) rather than an unreachable target (503). The history of
// site.test is read once while the store works and then served from
// memory (a long HistoryTTL), so the probe runs and only the write fails.
func TestStorageFailureIs500(t *testing.T) {
	w := newWorld(t, notary.Config{HistoryTTL: time.Hour})
	base := "https://" + w.notary.Addr.String()
	resp, err := w.client.Get(base + "/target/site.test+443")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("history before any probe: %d", resp.StatusCode)
	}
	w.notary.History.Close()

	for _, tt := range []struct {
		name, path, ctype, body string
	}{
		{"convergence", "/target/site.test+443", "application/x-www-form-urlencoded", "fingerprint=" + sha1Colon(w.site.Leaf().Cert.Raw)},
		{"v1", "/v1/check", "application/json", `{"host":"site.test","port":443}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if code, b := postTo(t, w, tt.path, tt.ctype, tt.body); code != http.StatusInternalServerError || !strings.Contains(b, "storage failed") {
				t.Errorf("status %d body %s; want 500 naming the storage failure", code, b)
			}
		})
	}
}

// TestIPv6LiteralTargets checks that both APIs probe a bracketed IPv6
// literal as the address it names. The testbed resolver maps the
// documentation address 2001:db8::1 to the loopback site, so nothing
// leaves the machine.
func TestIPv6LiteralTargets(t *testing.T) {
	w := newWorld(t, notary.Config{})
	w.path.Set("2001:db8::1", w.site.Addr)
	for _, tt := range []struct {
		name, path, ctype, body string
	}{
		{"convergence", "/target/[2001:db8::1]+443", "application/x-www-form-urlencoded", "fingerprint=" + sha1Colon(w.site.Leaf().Cert.Raw)},
		{"v1 bracketed", "/v1/check", "application/json", `{"host":"[2001:db8::1]","port":443}`},
		{"v1 bare", "/v1/check", "application/json", `{"host":"2001:db8::1","port":443}`},
		{"v1 long form", "/v1/check", "application/json", `{"host":"[2001:0db8:0:0:0:0:0:1]","port":443}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if code, b := postTo(t, w, tt.path, tt.ctype, tt.body); code != http.StatusOK {
				t.Errorf("status %d body %s; want 200", code, b)
			}
		})
	}
}
