package consensus

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/notary"
)

// recordingListener counts the connections it accepts and keeps what each
// one sent first, so a test can see the CONNECT requests a bouncer got.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	reads []*bytes.Buffer
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	buf := &bytes.Buffer{}
	l.mu.Lock()
	l.reads = append(l.reads, buf)
	l.mu.Unlock()
	return &recordingConn{Conn: c, l: l, buf: buf}, nil
}

func (l *recordingListener) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, b := range l.reads {
		s := b.String()
		if i := strings.Index(s, "\r\n\r\n"); i >= 0 {
			s = s[:i]
		}
		out = append(out, s)
	}
	return out
}

type recordingConn struct {
	net.Conn
	l   *recordingListener
	buf *bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	if c.buf.Len() < 4096 {
		c.buf.Write(p[:n])
	}
	c.l.mu.Unlock()
	return n, err
}

// TestBounceNamesReplicas queries a two-replica notary (both pinning the
// same certificate) through pkie's own bouncer when the first replica is
// down. Like Convergence clients, the client names the other replica in an
// X-Convergence-Notary header, so the bouncer reaches it on the first
// CONNECT rather than the client paying a failed tunnel per dead replica.
func TestBounceNamesReplicas(t *testing.T) {
	k, other := rsaKeys(t)
	b := startTestNotary(t, k)
	fp := [20]byte{9}
	b.sees("site.test+443", fp, time.Hour)
	live := b.bundle(t, "B").Hosts[0]
	deadLn, _ := net.Listen("tcp", "127.0.0.1:0")
	deadPort := deadLn.Addr().(*net.TCPAddr).Port
	deadLn.Close()
	dead, err := NewHost("127.0.0.1", deadPort, 0, b.cert)
	if err != nil {
		t.Fatal(err)
	}
	bBundle := &Bundle{Version: 1, Name: "B", Hosts: []Host{dead, live}}

	bouncer := notary.NewBouncer([]string{dead.SSLAddr(), live.SSLAddr()}, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingListener{Listener: ln}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- notary.ServeBouncer(ctx, rec, bouncer) }()
	t.Cleanup(func() { cancel(); <-done })

	aHost, err := NewHost("127.0.0.1", 1, ln.Addr().(*net.TCPAddr).Port, selfSigned(t, other, "a.test"))
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{BounceVia: &Bundle{Version: 1, Name: "A", Hosts: []Host{aHost}}}
	defer c.CloseIdleConnections()
	a := c.Query(context.Background(), bBundle, "site.test", 443, fp)
	if a.Vote != Yes || !a.Bounced {
		t.Fatalf("bounced Query = %s bounced=%v %q", a.Vote, a.Bounced, a.Reason)
	}
	reqs := rec.requests()
	want := "X-Convergence-Notary: 127.0.0.1+" + live.SSLAddr()[len("127.0.0.1:"):]
	if len(reqs) != 1 || !strings.HasPrefix(reqs[0], "CONNECT "+dead.SSLAddr()+" ") || !strings.Contains(reqs[0], want) {
		t.Fatalf("bouncer got %d connections %q; want one CONNECT %s naming %q", len(reqs), reqs, dead.SSLAddr(), want)
	}
}
