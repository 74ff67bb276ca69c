package notary_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/notarywire"
	"github.com/pkie/pkie/internal/pgtest"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// syncBuffer is a log destination safe for the notary's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// handNotary starts a notary built by hand on path, with a probe timeout
// of its own (testbed notaries use the 2 s default) and its log captured:
// a long timeout keeps probes of a silent target holding their slots
// until the target closes, so tests of the queue do not race the clock.
// dsn "" means SQLite in a temporary directory.
func handNotary(t *testing.T, path *testbed.Resolver, dsn string, timeout time.Duration, cfg notary.Config) (*world, *syncBuffer) {
	t.Helper()
	id, err := notary.NewIdentity("hand", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if dsn == "" {
		dsn = filepath.Join(t.TempDir(), "history.db")
	}
	h, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	logs := new(syncBuffer)
	cfg.Identity, cfg.History = id, h
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.Prober = probe.New(probe.Options{AllowPrivate: true, Lookup: path.Lookup, Timeout: timeout})
	n, err := notary.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.ServeTLS(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; h.Close() })
	tn := &testbed.Notary{Notary: n, Name: "hand", Addr: ln.Addr().(*net.TCPAddr).AddrPort(), Identity: id, History: h}
	return &world{path: path, notary: tn, client: pinnedClient(id.Cert)}, logs
}

// from returns a copy of w whose client connects from the loopback address
// src (any of 127.0.0.0/8 on Linux), so the notary sees a distinct client.
func (w *world) from(src string) *world {
	c := pinnedClient(w.notary.Identity.Cert)
	tr := c.Transport.(*http.Transport)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	tr.DialContext = d.DialContext
	c.Timeout = time.Minute
	cp := *w
	cp.client = c
	return &cp
}

func (w *world) v1(t *testing.T, req string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := w.client.Post("https://"+w.notary.Addr.String()+"/v1/check", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (w *world) v1Answer(t *testing.T, body []byte) notarywire.Answer {
	t.Helper()
	var r notarywire.Response
	var a notarywire.Answer
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if err := json.Unmarshal(r.Answer, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPinnedProbeDoesNotPoisonNameHistory is the pinned-address attack:
// a v1 request pins the victim's name to the attacker's address, so the
// notary probes the attacker's site. What it saw there must not answer
// later checks of the name, over either API; the signed answer to the
// pinned request says which address was probed, and a client refuses it as
// an answer about the name.
func TestPinnedProbeDoesNotPoisonNameHistory(t *testing.T) {
	w := newWorld(t, notary.Config{})
	rogue, err := testbed.NewRootCA("Rogue Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := rogue.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
	if err != nil {
		t.Fatal(err)
	}
	attacker, err := testbed.StartSite("site.test", forged, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	port := int(attacker.Addr.Port()) // the name is asked about at the attacker's port
	forgedSum := sha256.Sum256(forged.Cert.Raw)
	forgedHex := hex.EncodeToString(forgedSum[:])
	forgedSHA1 := sha1Colon(forged.Cert.Raw)
	pub := w.notary.Identity.V1.Public().(ed25519.PublicKey)
	pinnedIP := attacker.Addr.Addr()

	pinned := fmt.Sprintf(`{"host":"site.test","port":%d,"ip":"%s","sha256":"%s"}`, port, pinnedIP, forgedHex)
	for i := 0; i < 3; i++ { // repeated, as an attacker would to grow the observed span
		code, _, body := w.v1(t, pinned)
		if code != http.StatusOK {
			t.Fatalf("pinned probe: %d %s", code, body)
		}
		q := consensus.V1Question{Host: "site.test", Port: port, SHA256: &forgedSum, IP: pinnedIP}
		a, err := consensus.VerifyV1(body, pub, q, time.Now(), time.Hour)
		if err != nil {
			t.Fatalf("the pinned answer fails the client's checks for the pinned question: %v", err)
		}
		if a.IP != pinnedIP.String() || a.Addr != attacker.Addr.String() || !a.Probed {
			t.Fatalf("pinned answer says ip %q addr %q probed %v; want %s, %s, true", a.IP, a.Addr, a.Probed, pinnedIP, attacker.Addr)
		}
		// Relayed as an answer about the name, a client refuses it.
		q.IP = netip.Addr{}
		if _, err := consensus.VerifyV1(body, pub, q, time.Now(), time.Hour); err == nil || !strings.Contains(err.Error(), "not about the name") {
			t.Fatalf("an answer about a pinned address passed as one about the name: %v", err)
		}
	}

	t.Run("convergence POST", func(t *testing.T) {
		code, body := w.post(t, "site.test+"+strconv.Itoa(port), "fingerprint="+forgedSHA1)
		if code != http.StatusConflict {
			t.Fatalf("the name with the attacker's fingerprint: %d %s; want 409 (the notary sees the real site)", code, body)
		}
		if fps := convergenceVerify(t, body, w.notary.Identity.Cert); strings.Contains(strings.Join(fps, " "), forgedSHA1) {
			t.Fatalf("the name's signed history lists the attacker's certificate: %v", fps)
		}
	})
	t.Run("convergence GET", func(t *testing.T) {
		resp, err := w.client.Get("https://" + w.notary.Addr.String() + "/target/site.test+" + strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			if fps := convergenceVerify(t, body, w.notary.Identity.Cert); strings.Contains(strings.Join(fps, " "), forgedSHA1) {
				t.Fatalf("the name's signed history lists the attacker's certificate: %v", fps)
			}
		}
	})
	t.Run("v1", func(t *testing.T) {
		code, _, body := w.v1(t, fmt.Sprintf(`{"host":"site.test","port":%d,"sha256":"%s"}`, port, forgedHex))
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
		a, err := consensus.VerifyV1(body, pub, consensus.V1Question{Host: "site.test", Port: port, SHA256: &forgedSum}, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if *a.Match || a.IP != "" {
			t.Fatalf("the name's answer: match %v ip %q probed %v; want a mismatch about the name", *a.Match, a.IP, a.Probed)
		}
		if _, ok := a.Find(forgedHex); ok {
			t.Fatal("the name's signed v1 history lists the attacker's certificate")
		}
	})
}

// TestHistoryBounded probes, pinned and by name, a server that shows a new
// certificate on every probe: the notary keeps MaxHistory records per
// target, and its answers stay as small, with SQLite and with PostgreSQL.
func TestHistoryBounded(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			dsn := ""
			if backend == "postgres" {
				dsn = pgtest.Start(t).DSN
			}
			base := newWorld(t, notary.Config{})
			const keep = 8
			w, _ := handNotary(t, base.path, dsn, 5*time.Second, notary.Config{MaxHistory: keep})
			port := int(base.site.Addr.Port())
			var leaves []*testbed.Leaf
			for i := 0; i < 3*keep; i++ {
				l, err := base.ca.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
				if err != nil {
					t.Fatal(err)
				}
				leaves = append(leaves, l)
			}
			for _, req := range []string{
				fmt.Sprintf(`{"host":"site.test","port":%d,"ip":"127.0.0.1"}`, port),
				fmt.Sprintf(`{"host":"site.test","port":%d}`, port),
			} {
				var body []byte
				for _, l := range leaves {
					base.site.SetLeaf(l)
					var code int
					code, _, body = w.v1(t, req)
					if code != http.StatusOK {
						t.Fatalf("%s: %d %s", req, code, body)
					}
				}
				a := w.v1Answer(t, body)
				if len(a.History) != keep {
					t.Fatalf("%s: answer lists %d certificates after %d distinct ones; want %d", req, len(a.History), len(leaves), keep)
				}
				last := sha256.Sum256(leaves[len(leaves)-1].Cert.Raw)
				if a.Current != hex.EncodeToString(last[:]) {
					t.Fatalf("current is not the last certificate seen")
				}
				if len(body) > 4<<10 {
					t.Fatalf("answer is %d bytes", len(body))
				}
			}
			ip := netip.MustParseAddr("127.0.0.1")
			for _, k := range []store.Key{{Host: "site.test", Port: port}, {Host: "site.test", Port: port, IP: ip}} {
				recs, err := w.notary.History.Lookup(context.Background(), k)
				if err != nil || len(recs) != keep {
					t.Fatalf("%+v: %d records stored, err %v; want %d", k, len(recs), err, keep)
				}
			}
			// The Convergence answer lists the same bounded history.
			code, body := w.post(t, "site.test+"+strconv.Itoa(port), "fingerprint="+sha1Colon(leaves[len(leaves)-1].Cert.Raw))
			if code != http.StatusOK || len(convergenceVerify(t, body, w.notary.Identity.Cert)) != keep {
				t.Fatalf("convergence: %d %s", code, body)
			}
		})
	}
}

// TestHistoryBoundOnRead checks that a history written before the bound
// (or with a larger one) is cut to MaxHistory in answers.
func TestHistoryBoundOnRead(t *testing.T) {
	base := newWorld(t, notary.Config{})
	w, _ := handNotary(t, base.path, "", 5*time.Second, notary.Config{MaxHistory: 4})
	k := store.Key{Host: "old.test", Port: 443}
	t0 := time.Now().Add(-time.Hour)
	var last [20]byte
	for i := 0; i < 10; i++ {
		s256, s1 := sha256.Sum256([]byte{byte(i)}), sha1.Sum([]byte{byte(i)})
		if err := w.notary.History.Observe(context.Background(), k, s256, s1, t0.Add(time.Duration(i)*time.Minute), 0); err != nil {
			t.Fatal(err)
		}
		last = s1
	}
	code, body := w.post(t, "old.test+443", "fingerprint="+probe.ColonHex(last[:]))
	if fps := convergenceVerify(t, body, w.notary.Identity.Cert); code != http.StatusOK || len(fps) != 4 || fps[3] != probe.ColonHex(last[:]) {
		t.Fatalf("%d: %v", code, fps)
	}
}

// flood sends each request from its own goroutine and returns once the
// notary has refused one of them as overloaded: from then on the share
// they count against is full, and stays full while the silent target
// holds their probes. The rest are collected by the returned wait.
func flood(t *testing.T, reqs []func() (int, []byte)) (wait func()) {
	t.Helper()
	refused := make(chan struct{}, len(reqs))
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := r()
			if code == http.StatusServiceUnavailable && bytes.Contains(body, []byte("overloaded")) {
				refused <- struct{}{}
			}
		}()
	}
	select {
	case <-refused:
	case <-time.After(30 * time.Second):
		t.Fatal("the flood was never refused")
	}
	return wg.Wait
}

func postFrom(w *world, path, ctype, body string) func() (int, []byte) {
	return func() (int, []byte) {
		resp, err := w.client.Post("https://"+w.notary.Addr.String()+path, ctype, strings.NewReader(body))
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
}

// TestProbeQueueFairness floods the probe queue with probes of a target
// that never answers TLS, once from one client address with distinct names
// and once from many client addresses with distinct SNI names of one host,
// and checks that another client's uncached checks of other hosts still
// get probes (200) while the flood holds its share.
func TestProbeQueueFairness(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flood func(w *world, silent netip.AddrPort) []func() (int, []byte)
	}{
		{"one client, many targets", func(w *world, silent netip.AddrPort) []func() (int, []byte) {
			attacker := w.from("127.0.0.2")
			var reqs []func() (int, []byte)
			for i := 0; i < 20; i++ {
				name := fmt.Sprintf("silent%d.test", i)
				w.path.Set(name, silent)
				reqs = append(reqs, postFrom(attacker, "/target/"+name+"+443", "application/x-www-form-urlencoded", "fingerprint="+sha1Colon([]byte("x"))))
			}
			return reqs
		}},
		{"many clients, one target", func(w *world, silent netip.AddrPort) []func() (int, []byte) {
			w.path.Set("silent.test", silent)
			var reqs []func() (int, []byte)
			for i := 0; i < 20; i++ {
				c := w.from(fmt.Sprintf("127.0.0.%d", 10+i))
				reqs = append(reqs, postFrom(c, "/v1/check", "application/json", fmt.Sprintf(`{"host":"silent.test","port":443,"sni":"n%d.silent.test"}`, i)))
			}
			return reqs
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newWorld(t, notary.Config{})
			silent, err := testbed.StartSilent()
			if err != nil {
				t.Fatal(err)
			}
			// 4 slots and 8 queue places in all; a client or a target
			// holds at most 1 slot and 2 places.
			w, _ := handNotary(t, base.path, "", time.Minute, notary.Config{MaxProbes: 4, MaxQueue: 8})
			wait := flood(t, tc.flood(w, silent.Addr))
			legit := w.from("127.0.0.3")
			good := "fingerprint=" + sha1Colon(base.site.Leaf().Cert.Raw)
			for i := 0; i < 8; i++ {
				name := fmt.Sprintf("legit%d.test", i) // uncached: each needs a probe
				w.path.Set(name, base.site.Addr)
				if code, body := postFrom(legit, "/target/"+name+"+443", "application/x-www-form-urlencoded", good)(); code != http.StatusOK {
					t.Errorf("legitimate check %d during the flood: %d %s", i, code, body)
				}
			}
			silent.Close() // ends the flood's probes
			wait()
		})
	}
}

// TestProbeQueueOverload503 checks that a request refused because the probe
// queue is full is counted in pkie_notary_overloaded_total and carries
// Retry-After, over both APIs.
func TestProbeQueueOverload503(t *testing.T) {
	base := newWorld(t, notary.Config{})
	silent, err := testbed.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	w, _ := handNotary(t, base.path, "", time.Minute, notary.Config{MaxProbes: 1, MaxQueue: 1})
	for i := 0; i < 6; i++ {
		w.path.Set(fmt.Sprintf("silent%d.test", i), silent.Addr)
	}
	type result struct {
		code   int
		header http.Header
		body   string
	}
	results := make(chan result, 6)
	var wg sync.WaitGroup
	send := func(path, ctype, body string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := w.client.Post("https://"+w.notary.Addr.String()+path, ctype, strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{resp.StatusCode, resp.Header, string(b)}
		}()
	}
	fp := "fingerprint=" + sha1Colon([]byte("x"))
	// One probe runs, one waits, two are refused: which two is a race,
	// how many is not.
	for i := 0; i < 4; i++ {
		send(fmt.Sprintf("/target/silent%d.test+443", i), "application/x-www-form-urlencoded", fp)
	}
	got := []result{<-results, <-results}
	// The queue stays full: both v1 requests are refused.
	send("/v1/check", "application/json", `{"host":"silent4.test","port":443}`)
	send("/v1/check", "application/json", `{"host":"silent5.test","port":443}`)
	got = append(got, <-results, <-results)
	for _, r := range got {
		if r.code != http.StatusServiceUnavailable || !strings.Contains(r.body, "overloaded") {
			t.Errorf("refused request: %d %s", r.code, r.body)
		}
		if r.header.Get("Retry-After") != "1" {
			t.Errorf("refused request without Retry-After: %d %s", r.code, r.body)
		}
	}
	if !strings.Contains(metricsText(t, w), "pkie_notary_overloaded_total 4\n") {
		t.Errorf("pkie_notary_overloaded_total is not 4 after 4 refusals:\n%s", grepMetric(metricsText(t, w), "pkie_notary_overloaded_total"))
	}
	silent.Close()
	wg.Wait()
}

func grepMetric(text, name string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestErrorBodiesHideInternals checks that a failed probe tells the client
// what kind of failure it was and nothing the notary alone knows (the
// addresses a name resolved to, resolver details, the system's connect
// error), over both APIs, while the log keeps the detail.
func TestErrorBodiesHideInternals(t *testing.T) {
	base := newWorld(t, notary.Config{})
	// The silent target costs one probe timeout per API.
	w, logs := handNotary(t, base.path, "", 2*time.Second, notary.Config{})
	silent, err := testbed.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := closed.Addr().(*net.TCPAddr).AddrPort()
	closed.Close()
	plain, _ := net.Listen("tcp", "127.0.0.1:0") // speaks no TLS: answers and hangs up
	defer plain.Close()
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.0 400 not TLS\r\n\r\n"))
			c.Close()
		}
	}()
	w.path.Set("refused.test", refused)
	w.path.Set("silent.test", silent.Addr)
	w.path.Set("plain.test", plain.Addr().(*net.TCPAddr).AddrPort())

	// A notary that refuses non-public addresses, on the system resolver:
	// localhost resolves from /etc/hosts, without a query leaving the host.
	strictID, _ := notary.NewIdentity("strict", []string{"127.0.0.1"})
	sh, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	strictLogs := new(syncBuffer)
	sn, _ := notary.New(notary.Config{Identity: strictID, History: sh, Prober: probe.New(probe.Options{}), Logger: slog.New(slog.NewTextHandler(strictLogs, nil))})
	sln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sn.ServeTLS(ctx, sln); close(done) }()
	defer func() { cancel(); <-done }()
	strict := &world{notary: &testbed.Notary{Notary: sn, Addr: sln.Addr().(*net.TCPAddr).AddrPort(), Identity: strictID}, client: pinnedClient(strictID.Cert)}

	fp := "fingerprint=" + sha1Colon([]byte("x"))
	for _, tc := range []struct {
		name   string
		w      *world
		logs   *syncBuffer
		host   string
		code   int
		want   string
		secret []string // in the log, never in the body
	}{
		{"internal address", strict, strictLogs, "localhost", 403, "address is not public", []string{"127.0.0.1"}},
		{"refused", w, logs, "refused.test", 503, "cannot connect to the target", []string{refused.String(), "connection refused"}},
		{"silent", w, logs, "silent.test", 503, "TLS handshake with the target failed (timed out)", []string{silent.Addr.String()}},
		{"not TLS", w, logs, "plain.test", 503, "TLS handshake with the target failed", []string{plain.Addr().String()}},
		{"unresolvable", w, logs, "nowhere.test", 503, "cannot resolve the target's host name", []string{"testbed resolver"}},
	} {
		for _, api := range []string{"convergence", "v1"} {
			t.Run(tc.name+"/"+api, func(t *testing.T) {
				var code int
				var body []byte
				if api == "v1" {
					code, _, body = tc.w.v1(t, `{"host":"`+tc.host+`","port":443}`)
				} else {
					code, body = tc.w.post(t, tc.host+"+443", fp)
				}
				if code != tc.code || !bytes.Contains(body, []byte(tc.want)) {
					t.Errorf("%d %s; want %d containing %q", code, body, tc.code, tc.want)
				}
				for _, s := range append(tc.secret, "dial tcp", "lookup ", "127.0.0.") {
					if bytes.Contains(body, []byte(s)) {
						t.Errorf("body %s tells the client %q", body, s)
					}
				}
				for _, s := range tc.secret {
					if !strings.Contains(tc.logs.String(), s) {
						t.Errorf("the log lacks %q", s)
					}
				}
			})
		}
	}
}

// TestHistoryLostAtStart checks that a notary whose history is empty
// although it has recorded observations before (its marker file exists)
// says so at error level and in pkie_notary_history_empty_at_start, and
// keeps serving; a new notary's empty history is not an error.
func TestHistoryLostAtStart(t *testing.T) {
	base := newWorld(t, notary.Config{})
	marker := filepath.Join(t.TempDir(), notary.FileHistorySeen)
	w, logs := handNotary(t, base.path, "", 5*time.Second, notary.Config{HistoryMarker: marker})
	if lost, err := w.notary.CheckHistory(context.Background()); err != nil || lost {
		t.Fatalf("a new notary: lost %v err %v", lost, err)
	}
	if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(metricsText(t, w), "pkie_notary_history_empty_at_start 0") {
		t.Fatalf("a new notary's empty history reported as lost:\n%s", logs)
	}
	if code, body := w.post(t, "site.test+443", "fingerprint="+sha1Colon(base.site.Leaf().Cert.Raw)); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	// The database is lost; the keys and the marker are not.
	w2, logs2 := handNotary(t, base.path, "", 5*time.Second, notary.Config{HistoryMarker: marker})
	if lost, err := w2.notary.CheckHistory(context.Background()); err != nil || !lost {
		t.Fatalf("lost history: lost %v err %v", lost, err)
	}
	if !strings.Contains(logs2.String(), "level=ERROR") || !strings.Contains(logs2.String(), "EMPTY") {
		t.Errorf("no error-level log line:\n%s", logs2)
	}
	if m := metricsText(t, w2); !strings.Contains(m, "pkie_notary_history_empty_at_start 1") {
		t.Errorf("gauge: %s", grepMetric(m, "pkie_notary_history_empty_at_start"))
	}
	if code, body := w2.post(t, "site.test+443", "fingerprint="+sha1Colon(base.site.Leaf().Cert.Raw)); code != http.StatusOK {
		t.Fatalf("serving after the warning: %d %s", code, body)
	}
	// A history that holds records is not lost, with or without a marker
	// (a notary from before the marker gets one).
	os.Remove(marker)
	if lost, err := w2.notary.CheckHistory(context.Background()); err != nil || lost {
		t.Fatalf("non-empty history: lost %v err %v", lost, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("a non-empty history did not mark itself: %v", err)
	}
}
