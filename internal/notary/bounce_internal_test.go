package notary

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBouncerClosesIdleConnections checks that the bouncer's listener does
// not let a client hold a connection open forever: neither idle after a
// refused request nor trickling a request body it never finishes. The idle
// bound is shortened for the test; the 20 s read deadline only decides
// that the server never closed the connection.
func TestBouncerClosesIdleConnections(t *testing.T) {
	b := NewBouncer(nil, 4)
	b.IdleTimeout = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeBouncer(ctx, ln, b) }()
	t.Cleanup(func() { cancel(); <-done })

	for _, tt := range []struct {
		name    string
		request string
	}{
		{"idle after a refused request", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"body never finished", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.WriteString(conn, tt.request); err != nil {
				t.Fatal(err)
			}
			// Whatever the bouncer answers, it must then close the
			// connection rather than wait on the client forever.
			_, err = io.Copy(io.Discard, conn)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the bouncer kept the connection open")
			}
		})
	}
}

// TestBouncerReclaimsStalledTunnel opens a tunnel to a far end that writes
// without pause and has the client stop reading. The relay's write to the
// client then blocks; the bouncer must close the tunnel after its idle
// timeout (shortened for the test) and free its slot, rather than hold both
// forever. The 20 s bound only decides that it never did.
func TestBouncerReclaimsStalledTunnel(t *testing.T) {
	far, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	farDone := make(chan error, 4)
	go func() {
		for {
			c, err := far.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 32<<10)
				c.SetWriteDeadline(time.Now().Add(20 * time.Second))
				for {
					if _, err := c.Write(buf); err != nil {
						farDone <- err
						return
					}
				}
			}()
		}
	}()

	b := NewBouncer([]string{far.Addr().String()}, 1)
	b.IdleTimeout = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeBouncer(ctx, ln, b) }()
	t.Cleanup(func() { cancel(); <-done })

	connect := func() (net.Conn, string) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", far.Addr())
		status := make([]byte, len("HTTP/1.1 200"))
		if _, err := io.ReadFull(c, status); err != nil {
			t.Fatal(err)
		}
		return c, string(status)
	}
	stalled, status := connect()
	defer stalled.Close()
	if status != "HTTP/1.1 200" {
		t.Fatalf("CONNECT: %q", status)
	}
	// The client reads nothing more. The far end's writes fail once the
	// bouncer gives up on the tunnel and closes its side.
	if err := <-farDone; errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the bouncer never closed a tunnel whose client stopped reading")
	}
	// With one tunnel slot, a new tunnel opens only if the stalled one's
	// slot was freed. The slot is released just after the far end's
	// connection is closed, so a 503 may still come first.
	for {
		c, status := connect()
		c.Close()
		if status == "HTTP/1.1 200" {
			break
		}
		if status != "HTTP/1.1 503" {
			t.Fatalf("CONNECT after the stalled tunnel: %q", status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FuzzBounceDestinations feeds arbitrary request-line targets and
// X-Convergence-Notary headers to the bouncer's destination parser. It
// dials nothing: what it checks is that every destination accepted is in
// the normal host:port form the allowed list is matched against, that
// normalizing it again changes nothing, and that the count stays bounded.
func FuzzBounceDestinations(f *testing.F) {
	f.Add("notary.test:443", "notary2.test+443")
	f.Add("[2001:db8::1]:4242", "2001:db8::2+4242, a.test+1")
	f.Add("a+b+1", "")
	f.Add("x", "+,+")
	f.Fuzz(func(t *testing.T, host, header string) {
		r := &http.Request{Method: http.MethodConnect, Host: host, Header: http.Header{}}
		for _, v := range strings.Split(header, "\n") {
			r.Header.Add(BounceHeader, v)
		}
		dests, err := destinations(r)
		if err != nil {
			return
		}
		if len(dests) == 0 || len(dests) > maxBounceDestinations {
			t.Fatalf("%d destinations from %q %q", len(dests), host, header)
		}
		for _, d := range dests {
			h, p, err := net.SplitHostPort(d)
			if err != nil || h == "" || p == "" || d != strings.ToLower(d) {
				t.Fatalf("destination %q is not a normal host:port (%v)", d, err)
			}
			if again, err := bounceDestination(d); err != nil || again != d {
				t.Fatalf("normalizing %q again gives %q, %v", d, again, err)
			}
		}
	})
}
