package oldctlog_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/pkie/pkie/internal/oldctlog"
)

// slowRequest opens a connection from local (a loopback address) to addr
// and sends the head of a request whose declared body never comes. The
// returned channel gets the response status, or 0 if the connection ended
// without one; the 20 s deadline only decides that the server never
// answered.
func slowRequest(t *testing.T, local, addr, head string) <-chan int {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	status := make(chan int, 1)
	go func() {
		br := bufio.NewReader(c)
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				status <- 0
				return
			}
			resp.Body.Close()
			if resp.StatusCode >= 200 {
				status <- resp.StatusCode
				return
			}
		}
	}()
	return status
}

// saturate opens slow add-chain requests, from several addresses since one
// cannot take every slot, until the add-chain pool of the given size is
// full: the requests beyond it are refused at once, so once that many
// have been, the pool is full. It returns the held requests. The body
// deadline must not end any of them meanwhile. The requests ask for 100
// Continue, as curl does for large bodies, which lets a server answer one
// it refuses without waiting for its body.
func saturate(t *testing.T, addr string, slots int) []<-chan int {
	t.Helper()
	head := "POST /v1/log/add-chain HTTP/1.1\r\nHost: log\r\nContent-Type: application/json\r\nContent-Length: 4000\r\nExpect: 100-continue\r\n\r\n"
	conns := slots + 3
	var pending []<-chan int
	for i := range conns {
		pending = append(pending, slowRequest(t, fmt.Sprintf("127.0.0.%d", 2+i%5), addr, head))
	}
	for refused := 0; refused < conns-slots; {
		for i := 0; i < len(pending); i++ {
			select {
			case code := <-pending[i]:
				if code != http.StatusServiceUnavailable {
					t.Fatalf("a slow add-chain got %d before the pool was full", code)
				}
				refused++
				pending = append(pending[:i], pending[i+1:]...)
				i--
			default:
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return pending
}

// TestSlowAddChainDoesNotStopReads holds every add-chain slot with
// submissions whose bodies never arrive and checks that the read endpoints
// provers and clients depend on still answer.
func TestSlowAddChainDoesNotStopReads(t *testing.T) {
	l, _ := filledLog(t, 4)
	if _, err := l.BuildSorted(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Small pools keep the test quick; the body deadline is long enough
	// not to end the slow requests during the test.
	srv := httptest.NewServer(l.Handler(HandlerOptions{MaxInFlight: 8, MaxAddChain: 8, BodyTimeout: time.Minute}))
	t.Cleanup(srv.Close) // after the slow requests' connections are closed
	saturate(t, srv.Listener.Addr().String(), 8)
	for _, path := range []string{
		"/v1/log/checkpoint",
		"/v1/log/proof/inclusion?index=0&size=4",
		"/v1/log/proof/consistency?first=1&second=4",
		"/v1/log/entries?start=0&end=2",
		"/v1/log/sct?key=" + strings.Repeat("00", 32),
		"/v1/sorted/checkpoint",
		"/v1/sorted/keys?start=0",
	} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			t.Errorf("GET %s while add-chain is saturated: %d", path, resp.StatusCode)
		}
	}
}

// TestSlowAddChainCutAtBodyDeadline checks that add-chain requests whose
// bodies never arrive are answered 400 at the body deadline, freeing their
// slots for the next submission.
func TestSlowAddChainCutAtBodyDeadline(t *testing.T) {
	l, chains := filledLog(t, 1)
	srv := httptest.NewServer(l.Handler(HandlerOptions{MaxAddChain: 8, BodyTimeout: 200 * time.Millisecond}))
	t.Cleanup(srv.Close)
	head := "POST /v1/log/add-chain HTTP/1.1\r\nHost: log\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{"
	var cut int
	for i := range 11 {
		// Each is refused at once or held until the body deadline.
		switch code := <-slowRequest(t, fmt.Sprintf("127.0.0.%d", 2+i%5), srv.Listener.Addr().String(), head); code {
		case http.StatusBadRequest:
			cut++
		case http.StatusServiceUnavailable:
		default:
			t.Fatalf("slow add-chain body: status %d, want 400 at the body deadline (or 503)", code)
		}
	}
	if cut == 0 {
		t.Fatal("no slow add-chain body was held until its deadline")
	}
	body, _ := json.Marshal(map[string][]string{"chain": {base64.StdEncoding.EncodeToString(chains[0][0])}})
	resp, err := srv.Client().Post(srv.URL+"/v1/log/add-chain", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("add-chain after the slow bodies were cut: %d", resp.StatusCode)
	}
}

// TestNonCanonicalPaths checks that paths http.ServeMux would redirect get
// the API's JSON error instead of a plain-text redirect.
func TestNonCanonicalPaths(t *testing.T) {
	l, _ := filledLog(t, 1)
	srv := httptest.NewServer(l.Handler(HandlerOptions{}))
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tt := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/v1//log/checkpoint", 400},
		{"GET", "/v1/log/../log/checkpoint", 400},
		{"GET", "/./v1/log/checkpoint", 400},
		{"GET", "/v1/log/checkpoint/.", 400},
		{"GET", "/v1/sorted//checkpoint", 400},
		{"POST", "//v1/log/add-chain", 400},
		{"GET", "/v1/sorted", 404},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(""))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct{ Error string }
			err = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != tt.code || err != nil || e.Error == "" || resp.Header.Get("Location") != "" ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q, Location %q, body error %q (%v); want %d with a JSON error",
					resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), e.Error, err, tt.code)
			}
		})
	}
}
