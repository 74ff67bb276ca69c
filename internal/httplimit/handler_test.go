package httplimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSlotsShare(t *testing.T) {
	s := NewSlots(4, 2)
	a, b := clientKeyString("192.0.2.1:1"), clientKeyString("192.0.2.2:1")
	var rels []func()
	for range 2 {
		rel, ok, _ := s.acquire(a)
		if !ok {
			t.Fatal("a client within its share was refused")
		}
		rels = append(rels, rel)
	}
	if _, ok, full := s.acquire(a); ok || full {
		t.Fatalf("beyond its share: ok %v, pool full %v; want refused for the share", ok, full)
	}
	for range 2 {
		if _, ok, _ := s.acquire(b); !ok {
			t.Fatal("another client was refused while slots were free")
		}
	}
	if _, ok, full := s.acquire(clientKeyString("192.0.2.3:1")); ok || !full {
		t.Fatalf("pool full: ok %v, full %v", ok, full)
	}
	rels[0]()
	rels[0]() // idempotent
	if _, ok, _ := s.acquire(a); !ok {
		t.Fatal("a released slot was not reusable")
	}
	if total, per := NewSlots(64, 0).Cap(); total != 64 || per != 16 {
		t.Fatalf("default share of 64: %d, %d", total, per)
	}
	if total, per := NewSlots(0, 9).Cap(); total != 1 || per != 1 {
		t.Fatalf("degenerate pool: %d, %d", total, per)
	}
}

// TestHandlerPools checks that a request takes a slot from its pool, that
// a client beyond its share gets 503 with Retry-After while another client
// is served, and that requests without a pool always answer.
func TestHandlerPools(t *testing.T) {
	pool := NewSlots(2, 1)
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	var overloaded atomic.Int32
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			started <- struct{}{}
			<-release
		}
	}), HandlerOptions{
		Pool: func(r *http.Request) *Slots {
			if r.URL.Path == "/healthz" {
				return nil
			}
			return pool
		},
		Overloaded: func(*http.Request) { overloaded.Add(1) },
	})
	addr, _ := server(t, Options{}, h)
	defer close(release)
	a := dial(t, addr, "127.0.0.1")
	fmt.Fprintf(a, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	resp := func(local, path string) *http.Response {
		c := dial(t, addr, local)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		r, err := http.ReadResponse(c.r, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		return r
	}
	if r := resp("127.0.0.1", "/x"); r.StatusCode != 503 || r.Header.Get("Retry-After") != "1" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("beyond the client's share: %d %v", r.StatusCode, r.Header)
	}
	if r := resp("127.0.0.1", "/healthz"); r.StatusCode != 200 {
		t.Fatalf("/healthz takes no slot: %d", r.StatusCode)
	}
	if r := resp("127.0.0.2", "/x"); r.StatusCode != 200 {
		t.Fatalf("another client: %d", r.StatusCode)
	}
	if overloaded.Load() != 1 {
		t.Fatalf("Overloaded called %d times, want 1", overloaded.Load())
	}
}

// TestHandlerBodyDeadline checks that a declared body that does not come
// ends the handler's read at the body deadline, that a body arriving at
// the minimum rate is read whole, and that a refused request with a
// pending body is answered at once.
func TestHandlerBodyDeadline(t *testing.T) {
	type result struct {
		n   int
		err error
	}
	got := make(chan result, 4)
	full := NewSlots(1, 1)
	hold, _, _ := full.acquire(clientKeyString("192.0.2.9:1"))
	defer hold()
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		got <- result{len(b), err}
	}), HandlerOptions{
		BodyTimeout: 300 * time.Millisecond,
		MinBodyRate: 1 << 20,
		Pool: func(r *http.Request) *Slots {
			if r.URL.Path == "/full" {
				return full
			}
			return nil
		},
	})
	addr, _ := server(t, Options{}, h)

	c := dial(t, addr, "127.0.0.1")
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
	if r := <-got; r.n != 3 || !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled body: read %d bytes, %v; want the deadline", r.n, r.err)
	}

	c = dial(t, addr, "127.0.0.1")
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789")
	if r := <-got; r.n != 10 || r.err != nil {
		t.Fatalf("whole body: %d bytes, %v", r.n, r.err)
	}

	// Refused: the answer must not wait for the body (the 20 s read
	// deadline only decides that it did).
	c = dial(t, addr, "127.0.0.1")
	fmt.Fprintf(c, "POST /full HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("refused request with a pending body: %v %v", resp, err)
	}

	// A recorder cannot take deadlines; the body is left as it is.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/", strings.NewReader("xyz")))
	if r := <-got; r.n != 3 || r.err != nil {
		t.Fatalf("recorder: %d bytes, %v", r.n, r.err)
	}
}

func TestHandlerCanonicalPaths(t *testing.T) {
	h := Handler(http.NotFoundHandler(), HandlerOptions{
		ParsesPath: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/raw/") },
	})
	for _, tt := range []struct {
		method, target string
		code           int
	}{
		{"GET", "/a/b", 404},
		{"GET", "/a/b/", 404},
		{"GET", "/", 404},
		{"GET", "//a", 400},
		{"GET", "/a//b", 400},
		{"GET", "/./a", 400},
		{"GET", "/a/.", 400},
		{"GET", "/a/..", 400},
		{"GET", "/a/../b/", 400},
		{"GET", "/a/%2e%2e/b", 404}, // ServeMux does not decode it either
		{"GET", "/raw/../x", 404},
		{"CONNECT", "/a//b", 404},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(tt.method, "http://x"+tt.target, nil)
		h.ServeHTTP(rec, req)
		if rec.Code != tt.code || (tt.code == 400 && !strings.Contains(rec.Body.String(), `"error"`)) {
			t.Errorf("%s %s: %d %s, want %d", tt.method, tt.target, rec.Code, rec.Body, tt.code)
		}
	}
}

// FuzzCanonicalPath checks that a path the handler accepts as canonical is
// one http.ServeMux would not redirect, and that canonical paths are fixed
// points.
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "//", "/a/./b", "/a/../b/", "/%2F..", "a", ""} {
		f.Add(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	f.Fuzz(func(t *testing.T, p string) {
		c := canonicalPath(p)
		if canonicalPath(c) != c {
			t.Fatalf("canonicalPath(%q) = %q is not canonical", p, c)
		}
		if len(p) == 0 || p[0] != '/' || p != c {
			return
		}
		u := &url.URL{RawPath: p}
		var err error
		if u.Path, err = url.PathUnescape(p); err != nil || u.EscapedPath() != p {
			return
		}
		req := &http.Request{Method: "GET", URL: u, Host: "x", Header: http.Header{}}
		h, _ := mux.Handler(req)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%q is canonical but ServeMux answers %d (Location %q)", p, rec.Code, rec.Header().Get("Location"))
		}
	})
}
