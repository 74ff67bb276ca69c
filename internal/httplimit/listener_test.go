package httplimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// server serves h on loopback through Listen with o and returns its
// address and listener.
func server(t *testing.T, o Options, h http.Handler) (string, *Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute}
	l := Listen(srv, ln, o)
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), l
}

// conn is a test client connection from a loopback address.
type testConn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr, local string) *testConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Only decides that the server never answered.
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &testConn{c, bufio.NewReader(c)}
}

// refused reports whether a connection from local is closed without being
// served: it may already fail to connect.
func refused(t *testing.T, addr, local string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return true
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return (&testConn{c, bufio.NewReader(c)}).get("/") == 0
}

// get sends a request for path and returns the status, or 0 if the
// connection was closed instead.
func (c *testConn) get(path string) int {
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closed reports whether the server has closed c (reading ends without a
// byte).
func (c *testConn) closed() bool {
	_, err := c.r.ReadByte()
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// waitStats polls l until ok accepts its stats: connection state changes
// reach the listener from the server's goroutines.
func waitStats(t *testing.T, l *Listener, ok func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(l.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("listener stats %+v never reached the expected state", l.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestListenerCaps checks the per-address and total connection caps and
// that idle connections, and only those, are closed to make room.
func TestListenerCaps(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			started <- struct{}{}
			<-release
		}
	})
	defer close(release)
	addr, l := server(t, Options{MaxConns: 3, MaxConnsPerClient: 2, HighWater: 3}, h)

	// Two busy connections from one address; its third is refused.
	for range 2 {
		c := dial(t, addr, "127.0.0.1")
		fmt.Fprintf(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
		<-started
	}
	if !refused(t, addr, "127.0.0.1") {
		t.Fatal("a third connection from one address was served; the per-address cap is 2")
	}
	// Another address still connects, and its connection goes idle.
	b := dial(t, addr, "127.0.0.2")
	if code := b.get("/"); code != 200 {
		t.Fatalf("another address: %d", code)
	}
	waitStats(t, l, func(s Stats) bool { return s.Open == 3 && s.Idle == 1 })
	// At the total cap, a new connection takes the idle one's place.
	c := dial(t, addr, "127.0.0.3")
	if code := c.get("/"); code != 200 {
		t.Fatalf("new address at the cap with an idle connection to close: %d", code)
	}
	if !b.closed() {
		t.Fatal("the idle connection was not closed to make room")
	}
	// Now no connection is idle once c is busy: the total cap holds.
	fmt.Fprintf(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	waitStats(t, l, func(s Stats) bool { return s.Open == 3 && s.Idle == 0 })
	if !refused(t, addr, "127.0.0.4") {
		t.Fatal("a connection beyond the total cap was served")
	}
	if s := l.Stats(); s.Refused != 2 || s.Shed != 1 {
		t.Fatalf("stats %+v, want 2 refused and 1 shed", s)
	}
}
