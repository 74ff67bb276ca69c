package cloud

import (
	"strings"
	"testing"
)

// TestSessionsFromFileLimit: the default session bound leaves FileReserve
// descriptors of the open-file limit for everything else, and New refuses
// an explicit bound, or a limit, that would not.
func TestSessionsFromFileLimit(t *testing.T) {
	cert, _, _, err := NewCertificate("fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit, clients, sessions int
		want                     int
		err                      string
	}{
		{limit: 1500, want: 1244},                         // 1,500 descriptors: no longer 81,920
		{limit: 1 << 20, want: 65536 + 16384},             // a large limit: the clients' bound
		{limit: 1500, clients: 100, want: 100 + 64},       // few clients: theirs
		{limit: 1500, sessions: 1244, want: 1244},         // explicit, within the limit
		{limit: 1500, sessions: 2100, err: "allows 1244"}, // 2,100 sessions from three addresses
		{limit: 200, err: "allows 0"},                     // too low a limit for any
	} {
		c, err := New(Config{Certificate: cert, FileLimit: tc.limit, MaxClients: tc.clients, MaxSessions: tc.sessions})
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
		if got := c.Config().MaxSessions; got != tc.want {
			t.Errorf("limit %d, clients %d, sessions %d: MaxSessions %d, want %d", tc.limit, tc.clients, tc.sessions, got, tc.want)
		}
	}
}
