package serve

import (
	"net"
	"strings"
	"testing"
)

// TestBindSessionListeners: empty addresses bind nothing; a busy port is
// an error naming its flag, and what was bound before it is closed again.
func TestBindSessionListeners(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	l, err := bindSessionListeners("", "", "")
	if err != nil || l.quic != nil || l.tcp != nil || l.http != nil {
		t.Fatalf("no addresses: %+v, %v", l, err)
	}
	l, err = bindSessionListeners("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quic := l.quic.LocalAddr().String()
	l.Close()
	for _, tc := range []struct {
		quic, tcp, http string
		want            string
	}{
		{quic, "127.0.0.1:0", busy.Addr().String(), "--http:"},
		{quic, busy.Addr().String(), "", "--tcp:"},
	} {
		_, err := bindSessionListeners(tc.quic, tc.tcp, tc.http)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Fatalf("busy port: %v, want an error starting %q", err, tc.want)
		}
		// The UDP socket bound before the failure was closed: its
		// address can be bound again.
		pc, err := net.ListenPacket("udp", tc.quic)
		if err != nil {
			t.Fatalf("the QUIC socket bound before %s failed stays open: %v", tc.want, err)
		}
		pc.Close()
	}
}
