package notary

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
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
	b.idle = 200 * time.Millisecond
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
