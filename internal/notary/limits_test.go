package notary_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/notary"
)

// dialFrom returns a dialer whose connections come from the loopback
// address local, so that a test can play several clients.
func dialFrom(local string) *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
}

// clientFrom is w's pinned client, connecting from local.
func (w *world) clientFrom(local string) *http.Client {
	c := pinnedClient(w.notary.Identity.Cert)
	c.Transport.(*http.Transport).DialContext = dialFrom(local).DialContext
	return c
}

// h2SlowStreams opens an HTTP/2 connection to addr from local and sends,
// on as many streams as the server allows (at most max), the headers of a
// v1 check declaring a 4000-byte body that never comes. Each stream's
// first answer (its status, or 0 for a reset) arrives on the returned
// channel; the 20 s deadline only decides that the server never answered.
func h2SlowStreams(t *testing.T, addr, local string, max int) (streams int, answers <-chan int) {
	t.Helper()
	c, err := tls.DialWithDialer(dialFrom(local), "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if c.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatal("the notary did not negotiate HTTP/2")
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The server's SETTINGS come first and say how many streams it allows.
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	streams = max
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok && int(v) < streams {
		streams = int(v)
	}
	if err := fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for i := range streams {
		hbuf.Reset()
		for _, kv := range [][2]string{
			{":method", "POST"}, {":scheme", "https"}, {":authority", addr}, {":path", "/v1/check"},
			{"content-type", "application/json"}, {"content-length", "4000"},
		} {
			enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hbuf.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	ch := make(chan int, streams)
	go func() {
		answered := map[uint32]bool{}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					fr.WritePing(true, f.Data)
				}
			case *http2.MetaHeadersFrame:
				if !answered[f.StreamID] {
					answered[f.StreamID] = true
					code := 0
					fmt.Sscan(f.PseudoValue("status"), &code)
					ch <- code
				}
			case *http2.RSTStreamFrame:
				if !answered[f.StreamID] {
					answered[f.StreamID] = true
					ch <- 0
				}
			}
		}
	}()
	return streams, ch
}

// TestHTTP2SlowBodiesKeepNotaryUp replays the slow-body attack: one client
// address opens HTTP/2 streams of v1 checks that declare a body and send
// none, more than the notary has request slots. The address gets its share
// of the slots and no more: /healthz still answers, even to that address,
// another client's check still succeeds, and the slow streams are cut at
// the body deadline.
func TestHTTP2SlowBodiesKeepNotaryUp(t *testing.T) {
	const slots = 64 // small so that the test is quick
	w := newWorld(t, notary.Config{MaxRequests: slots, BodyTimeout: 500 * time.Millisecond})
	addr := w.notary.Addr.String()
	var answers []<-chan int
	total := 0
	for range 2 {
		n, ch := h2SlowStreams(t, addr, "127.0.0.1", 100)
		total += n
		answers = append(answers, ch)
	}
	if total <= slots {
		t.Fatalf("only %d streams: too few to fill %d slots", total, slots)
	}
	// The streams beyond the slots are refused at once; once that many
	// have been answered, every slot the address can take is held.
	codes := map[int]int{}
	next := func() int {
		select {
		case c := <-answers[0]:
			return c
		case c := <-answers[1]:
			return c
		case <-time.After(20 * time.Second):
			t.Fatalf("streams answered: %v of %d; the others were never cut", codes, total)
			return 0
		}
	}
	for n := 0; n < total-slots; n++ {
		codes[next()]++
	}

	resp, err := w.clientFrom("127.0.0.1").Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz during the attack: %d", resp.StatusCode)
	}
	other := w.clientFrom("127.0.0.2")
	resp, err = other.Post("https://"+addr+"/target/site.test+443", "application/x-www-form-urlencoded",
		strings.NewReader("fingerprint="+sha1Colon(w.site.Leaf().Cert.Raw)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("another client's check during the attack: %d", resp.StatusCode)
	}

	for n := total - slots; n < total; n++ {
		codes[next()]++
	}
	if codes[http.StatusBadRequest] == 0 || codes[http.StatusBadRequest]+codes[http.StatusServiceUnavailable] != total {
		t.Errorf("stream answers by status %v: want 503 for those beyond the address's share and 400 (body deadline) for the others", codes)
	}
}

// TestNotaryConnectionCaps checks the notary's connection caps: beyond the
// per-address cap an address's new connections are closed at once while
// another address still connects, and the total cap holds. The held
// connections are busy (a request whose body has not arrived), so none is
// idle and none can be closed to make room.
func TestNotaryConnectionCaps(t *testing.T) {
	w := newWorld(t, notary.Config{BodyTimeout: time.Minute, Conns: httplimit.Options{MaxConns: 3, MaxConnsPerClient: 2}})
	addr := w.notary.Addr.String()
	dial := func(local string) (net.Conn, error) {
		c, err := tls.DialWithDialer(dialFrom(local), "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		if err != nil {
			return nil, err
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c, nil
	}
	hold := func(local string) net.Conn {
		t.Helper()
		c, err := dial(local)
		if err != nil {
			t.Fatalf("connection from %s within the caps: %v", local, err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /v1/check HTTP/1.1\r\nHost: notary\r\nContent-Length: 100\r\n\r\n")
		return c
	}
	refused := func(local, why string) {
		t.Helper()
		if c, err := dial(local); err == nil {
			c.Close()
			t.Fatalf("connection from %s accepted %s", local, why)
		}
	}
	hold("127.0.0.1")
	hold("127.0.0.1")
	refused("127.0.0.1", "beyond the per-address cap")
	b := hold("127.0.0.2")
	refused("127.0.0.3", "beyond the total cap")
	// A closed connection frees its place (once the server has seen it).
	b.Close()
	for {
		c, err := dial("127.0.0.3")
		if err == nil {
			c.Close()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNotaryNonCanonicalPaths checks that paths http.ServeMux would
// redirect get the API's JSON error instead of a plain-text redirect.
func TestNotaryNonCanonicalPaths(t *testing.T) {
	w := newWorld(t, notary.Config{})
	c := w.client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tt := range []struct {
		method, path string
		code         int
	}{
		{"POST", "/v1//check", 400},
		{"POST", "/v1/./check", 400},
		{"GET", "/./healthz", 400},
		{"GET", "/v1/../healthz", 400},
		{"GET", "//metrics", 400},
		{"GET", "/v1/key/", 404},
		{"GET", "/v1", 404},
		{"POST", "/target/.", 400},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), tt.method, "https://"+w.notary.Addr.String()+tt.path, strings.NewReader("{}"))
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
