package forwarder

import (
	"strings"
	"testing"
)

// TestSessionsFromFileLimit: as the cloud's, the forwarder's default
// session bound leaves FileReserve descriptors of the open-file limit for
// its HTTP listener and its sessions to clouds, and New refuses an
// explicit bound, or a limit, that would not. Before, the default was
// 81,920 sessions whatever the limit.
func TestSessionsFromFileLimit(t *testing.T) {
	cert := selfSigned(t, "fd-forwarder")
	for _, tc := range []struct {
		limit, clients, sessions int
		want                     int
		err                      string
	}{
		{limit: 1500, want: 1500 - FileReserve},
		{limit: 1 << 20, want: 65536 + 16384},
		{limit: 1500, clients: 100, want: 100 + 64},
		{limit: 1500, sessions: 1500 - FileReserve, want: 1500 - FileReserve},
		{limit: 1500, sessions: 2100, err: "allows 1372"},
		{limit: FileReserve, err: "allows 0"},
	} {
		f, err := New(Config{Certificate: cert, EphIDKey: testKey(), FileLimit: tc.limit, MaxClients: tc.clients, MaxSessions: tc.sessions})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "ulimit -n") {
				t.Errorf("limit %d, sessions %d: %v, want an error saying %q", tc.limit, tc.sessions, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("limit %d: %v", tc.limit, err)
			continue
		}
		if got := f.Config().MaxSessions; got != tc.want {
			t.Errorf("limit %d, clients %d, sessions %d: MaxSessions %d, want %d", tc.limit, tc.clients, tc.sessions, got, tc.want)
		}
	}
}
