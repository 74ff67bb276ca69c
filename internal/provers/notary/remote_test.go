package notary

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/httplimit"
)

// TestRemoteOf: each requester the cloud can name maps to an address the
// notary's per-client shares key on, distinct requesters to distinct
// shares, and a request without one to the single shared address.
func TestRemoteOf(t *testing.T) {
	share := func(requester string) string {
		return httplimit.RequestClientKey(&http.Request{RemoteAddr: remoteOf(requester)}).String()
	}
	for _, tc := range []struct{ requester, remote, share string }{
		{"", cloudRemote, "::/64"},
		{"203.0.113.7", "203.0.113.7:0", "203.0.113.7/32"},
		{"2001:db8:1:2::/64", "[2001:db8:1:2::]:0", "2001:db8:1:2::/64"},
		{"2001:db8:1:2::99", "[2001:db8:1:2::99]:0", "2001:db8:1:2::/64"},
	} {
		if got := remoteOf(tc.requester); got != tc.remote {
			t.Errorf("remoteOf(%q) = %q, want %q", tc.requester, got, tc.remote)
		}
		if got := share(tc.requester); got != tc.share {
			t.Errorf("share of %q = %q, want %q", tc.requester, got, tc.share)
		}
	}
	a, b := share("client 0a0b0c0d"), share("client 0a0b0c0e")
	if a == b || !strings.HasPrefix(a, "fd") || !strings.HasSuffix(a, "/64") || a == share("") {
		t.Errorf("opaque requesters share %q and %q", a, b)
	}
}
