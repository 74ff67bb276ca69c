package soak

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/internal/notarywire"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// attack is one hostile traffic generator. It keeps its counts across the
// phases it runs in.
type attack struct {
	name     string
	source   string
	w        *world
	sc       Scale
	c        *counters
	phases   []string
	run      func(ctx context.Context)
	achieved func() string
}

func newAttack(name string, w *world, sc Scale) *attack {
	a := &attack{name: name, w: w, sc: sc}
	switch name {
	case AttackH2SlowBodies:
		a.h2SlowBodies()
	case AttackSlowAddChain:
		a.slowAddChain()
	case AttackProbeFlood:
		a.probeFlood()
	case AttackIdleConns:
		a.idleConns()
	case AttackPoison:
		a.poison()
	case AttackMalformed:
		a.malformed()
	}
	return a
}

func (a *attack) stats() AttackStats {
	info := attackInfo[a.name]
	return AttackStats{Name: a.name, Target: info.target, Source: a.source, What: info.what,
		Phases: a.phases, Counters: a.c.list(), Achieved: a.achieved()}
}

// workers runs n copies of once until ctx ends, each pausing at least
// pause between rounds: whatever the server answers, and however fast, an
// attacker never spins. The workers start spread over the first second:
// hundreds of TLS handshakes at one instant would stall this process's
// share of the CPU (the services' and the good client's too) for a moment
// whatever the services' bounds, and that is not what the soak measures.
func workers(ctx context.Context, n int, pause time.Duration, once func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sleep(ctx, time.Duration(i)*time.Second/time.Duration(n))
			for ctx.Err() == nil {
				t0 := time.Now()
				once(ctx, i)
				sleep(ctx, pause-time.Since(t0))
			}
		}()
	}
	wg.Wait()
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// slowAddChain opens add-chain requests that announce a
// 64 KiB body and trickle it one byte a second, so each holds whatever the
// log gives a request in flight for as long as the log lets it.
func (a *attack) slowAddChain() {
	a.source = slowAddSource
	a.c = newCounters("requests_started", "conns_failed", "responses_400", "responses_408", "responses_503", "responses_other",
		"closed_by_server", "held_ms_total")
	held := a.c.gauge("requests_held")
	a.run = func(ctx context.Context) {
		workers(ctx, a.sc.SlowBodies, time.Second, func(ctx context.Context, _ int) {
			conn, err := dialer(a.source).DialContext(ctx, "tcp", a.w.logAddr())
			if err != nil {
				a.c.add("conns_failed", 1)
				return
			}
			defer conn.Close()
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			if _, err := io.WriteString(conn, "POST /ct/v1/add-chain HTTP/1.1\r\nHost: log\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{"); err != nil {
				a.c.add("conns_failed", 1)
				return
			}
			a.c.add("requests_started", 1)
			held.inc()
			t0 := time.Now()
			defer func() {
				held.dec()
				a.c.add("held_ms_total", time.Since(t0).Milliseconds())
			}()
			answered := make(chan int, 1)
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					answered <- 0
					return
				}
				resp.Body.Close()
				answered <- resp.StatusCode
			}()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			// How the log ended the request; a connection this worker
			// closed at the end of its phase is not the log's doing.
			ended := func(code int) {
				if ctx.Err() == nil {
					a.countStatus(code)
				}
			}
			for {
				select {
				case code := <-answered:
					ended(code)
					return
				case <-ctx.Done():
					return
				case <-tick.C:
					if _, err := io.WriteString(conn, " "); err != nil {
						select {
						case code := <-answered:
							ended(code)
						case <-time.After(time.Second):
							ended(0)
						}
						return
					}
				}
			}
		})
	}
	a.achieved = func() string {
		n := a.c.get("requests_started")
		avg := 0.0
		if n > 0 {
			avg = float64(a.c.get("held_ms_total")) / float64(n) / 1000
		}
		return fmt.Sprintf("held up to %d add-chain requests open at once, %.1f s each on average; the log answered %d with 400, %d with 408, %d with 503",
			a.c.get("requests_held_peak"), avg, a.c.get("responses_400"), a.c.get("responses_408"), a.c.get("responses_503"))
	}
}

func (a *attack) countStatus(code int) {
	switch code {
	case 0:
		a.c.add("closed_by_server", 1)
	case 400, 408, 503:
		a.c.add(fmt.Sprintf("responses_%d", code), 1)
	default:
		a.c.add("responses_other", 1)
	}
}

// probeFlood keeps FloodWorkers v1 checks in flight, each with a
// new SNI name of a target that accepts TCP and never answers TLS, so none
// coalesces with another and each probe holds a slot for the prober's whole
// timeout.
func (a *attack) probeFlood() {
	a.source = floodSource
	a.c = newCounters("requests", "responses_503", "responses_429", "responses_other", "errors", "cut_by_phase_end", "slot_holds")
	var n atomic.Int64
	a.run = func(ctx context.Context) {
		c := httpClient(a.source, nil, true, a.sc.FloodWorkers, 40*time.Second)
		defer c.CloseIdleConnections()
		port := int(a.w.silent.Addr.Port())
		workers(ctx, a.sc.FloodWorkers, time.Second, func(ctx context.Context, _ int) {
			body, _ := json.Marshal(notarywire.Request{Host: "silent.test", Port: port, SNI: fmt.Sprintf("f%d.silent.test", n.Add(1))})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.w.notaryURL()+"/v1/check", strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			a.c.add("requests", 1)
			t0 := time.Now()
			resp, err := c.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					a.c.add("errors", 1)
				} else {
					a.c.add("cut_by_phase_end", 1)
				}
				return
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			switch resp.StatusCode {
			case 503, 429:
				a.c.add(fmt.Sprintf("responses_%d", resp.StatusCode), 1)
			default:
				a.c.add("responses_other", 1)
			}
			// An answer after most of the prober's timeout means a probe of
			// the silent target was admitted and held a slot throughout.
			if time.Since(t0) >= probe.DefaultTimeout*3/4 {
				a.c.add("slot_holds", 1)
			}
		})
	}
	a.achieved = func() string {
		return fmt.Sprintf("%d checks of a silent target sent; %d were admitted and held a probe slot for the prober's timeout; %d refused with 503, %d with 429",
			a.c.get("requests"), a.c.get("slot_holds"), a.c.get("responses_503"), a.c.get("responses_429"))
	}
}

// idleConns holds IdleConns connections open to each service and
// sends nothing more: to the notary an HTTP/2 connection (preface and
// settings, nothing else), to the log an HTTP/1.1 keep-alive connection
// after one request. A connection the server closes is reopened after a
// second.
func (a *attack) idleConns() {
	a.source = idleSource
	a.c = newCounters("notary_opened", "notary_failed", "notary_closed_by_server", "log_opened", "log_failed", "log_closed_by_server")
	nh, lh := a.c.gauge("notary_held"), a.c.gauge("log_held")
	a.run = func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			workers(ctx, a.sc.IdleConns, time.Second, func(ctx context.Context, _ int) {
				fr, conn, err := h2Dial(ctx, a.source, a.w.notary.Addr.String())
				if err != nil {
					a.c.add("notary_failed", 1)
					return
				}
				defer conn.Close()
				stop := context.AfterFunc(ctx, func() { conn.Close() })
				defer stop()
				a.c.add("notary_opened", 1)
				nh.inc()
				defer nh.dec()
				var wmu sync.Mutex
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						if ctx.Err() == nil {
							a.c.add("notary_closed_by_server", 1)
						}
						return
					}
					h2Housekeeping(fr, &wmu, f)
				}
			})
		}()
		go func() {
			defer wg.Done()
			workers(ctx, a.sc.IdleConns, time.Second, func(ctx context.Context, _ int) {
				conn, err := dialer(a.source).DialContext(ctx, "tcp", a.w.logAddr())
				if err != nil {
					a.c.add("log_failed", 1)
					return
				}
				defer conn.Close()
				stop := context.AfterFunc(ctx, func() { conn.Close() })
				defer stop()
				br := bufio.NewReader(conn)
				io.WriteString(conn, "GET /checkpoint HTTP/1.1\r\nHost: log\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					a.c.add("log_failed", 1)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				a.c.add("log_opened", 1)
				lh.inc()
				defer lh.dec()
				// Idle now: the next read returns when the server closes.
				if _, err := br.ReadByte(); err != nil && ctx.Err() == nil {
					a.c.add("log_closed_by_server", 1)
				}
			})
		}()
		wg.Wait()
	}
	a.achieved = func() string {
		return fmt.Sprintf("held up to %d idle connections to the notary and %d to the log (of %d each tried); the servers closed %d and %d",
			a.c.get("notary_held_peak"), a.c.get("log_held_peak"), a.sc.IdleConns, a.c.get("notary_closed_by_server"), a.c.get("log_closed_by_server"))
	}
}

// poison runs its own TLS server at 127.0.0.7 on the victim site's
// port, serving a new certificate for victim.test on every connection, and
// asks the notary over v1 to check victim.test pinned to that address. It
// then asks, without a pin, whether the notary vouches for the certificate
// it was shown: over Convergence (the forged SHA-1) and over v1 (the forged
// SHA-256).
func (a *attack) poison() {
	a.source = poisonSource
	a.c = newCounters("pinned_checks", "pinned_accepted", "server_failed", "forged_vouched_convergence", "forged_refused_convergence",
		"forged_vouched_v1", "forged_refused_v1", "errors", "victim_history_entries", "victim_history_bytes")
	var mu sync.Mutex
	served := map[string]string{} // SHA-256 hex → SHA-1 Convergence form of certificates served
	a.run = func(ctx context.Context) {
		forger, err := testbed.NewRootCA("Attacker CA", testbed.ECDSAP256)
		if err != nil {
			a.c.add("server_failed", 1)
			return
		}
		port := int(a.w.victim.Addr.Port())
		ln, err := tls.Listen("tcp", net.JoinHostPort(poisonServerAddr, fmt.Sprint(port)), &tls.Config{
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				l, err := forger.Issue(testbed.LeafOptions{DNSNames: []string{"victim.test"}})
				if err != nil {
					return nil, err
				}
				s2, s1 := sha256.Sum256(l.Cert.Raw), sha1.Sum(l.Cert.Raw)
				mu.Lock()
				if len(served) > 100000 {
					clear(served)
				}
				served[hex.EncodeToString(s2[:])] = probe.ColonHex(s1[:])
				mu.Unlock()
				c := l.TLSCertificate()
				return &c, nil
			},
		})
		if err != nil {
			a.c.add("server_failed", 1)
			return
		}
		srv := &http.Server{ErrorLog: discardLog(), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()

		c := httpClient(a.source, nil, true, 2, 40*time.Second)
		defer c.CloseIdleConnections()
		ask := func(ctx context.Context, path, ctype, body string) (int, []byte) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.w.notaryURL()+path, strings.NewReader(body))
			req.Header.Set("Content-Type", ctype)
			resp, err := c.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					a.c.add("errors", 1)
				}
				return 0, nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			return resp.StatusCode, b
		}
		workers(ctx, 1, a.sc.PoisonEvery, func(ctx context.Context, _ int) {
			pin, _ := json.Marshal(notarywire.Request{Host: "victim.test", Port: port, IP: poisonServerAddr})
			a.c.add("pinned_checks", 1)
			code, b := ask(ctx, "/v1/check", "application/json", string(pin))
			if code != http.StatusOK {
				return
			}
			a.c.add("pinned_accepted", 1)
			var resp notarywire.Response
			var ans notarywire.Answer
			if json.Unmarshal(b, &resp) != nil || json.Unmarshal(resp.Answer, &ans) != nil {
				return
			}
			mu.Lock()
			fp1, forged := served[ans.Current]
			mu.Unlock()
			if !forged {
				return
			}
			if code, _ := ask(ctx, fmt.Sprintf("/target/victim.test+%d", port), "application/x-www-form-urlencoded", "fingerprint="+fp1); code == http.StatusOK {
				a.c.add("forged_vouched_convergence", 1)
			} else if code != 0 {
				a.c.add("forged_refused_convergence", 1)
			}
			q, _ := json.Marshal(notarywire.Request{Host: "victim.test", Port: port, SHA256: ans.Current})
			code, b = ask(ctx, "/v1/check", "application/json", string(q))
			if code == 0 {
				return
			}
			if code == http.StatusOK && json.Unmarshal(b, &resp) == nil && json.Unmarshal(resp.Answer, &ans) == nil && ans.Match != nil && *ans.Match {
				a.c.add("forged_vouched_v1", 1)
			} else {
				a.c.add("forged_refused_v1", 1)
			}
		})
		// What an honest client asking about the name gets now.
		hctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(hctx, http.MethodGet, a.w.notaryURL()+fmt.Sprintf("/target/victim.test+%d", port), nil)
		if resp, err := c.Do(req); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			resp.Body.Close()
			var h struct {
				List []json.RawMessage `json:"fingerprintList"`
			}
			if json.Unmarshal(b, &h) == nil {
				a.c.set("victim_history_entries", int64(len(h.List)))
				a.c.set("victim_history_bytes", int64(len(b)))
			}
		}
	}
	a.achieved = func() string {
		return fmt.Sprintf("%d of %d pinned checks accepted; the notary then vouched for the attacker's certificate under victim.test %d times over Convergence and %d over v1; the name's history holds %d entries (%d bytes)",
			a.c.get("pinned_accepted"), a.c.get("pinned_checks"), a.c.get("forged_vouched_convergence"), a.c.get("forged_vouched_v1"),
			a.c.get("victim_history_entries"), a.c.get("victim_history_bytes"))
	}
}

// malformedCase is one hostile request and the service it goes to.
type malformedCase struct {
	log                 bool
	method, path, ctype string
	body                string
	// static marks the log's static-ct-api read path, whose errors are
	// plain-text 4xx as static file servers answer, not JSON.
	static bool
}

func malformedCases(port int) []malformedCase {
	big := strings.Repeat("A", 9<<10)
	t := fmt.Sprintf("/target/site.test+%d", port)
	form := "application/x-www-form-urlencoded"
	js := "application/json"
	return []malformedCase{
		{false, "POST", t, form, "fingerprint=zz", false},
		{false, "POST", t, form, "fingerprint=" + big, false},
		{false, "POST", "/target/.", form, "fingerprint=00", false},
		{false, "POST", "/target/site.test+99999", form, "fingerprint=00", false},
		{false, "POST", "/target/%00+443", form, "", false},
		{false, "GET", "/v1/../healthz", "", "", false},
		{false, "GET", "//v1/key", "", "", false},
		{false, "POST", "/v1/check", js, "{", false},
		{false, "POST", "/v1/check", js, `{"host":"site.test","port":1,"evil":1}`, false},
		{false, "POST", "/v1/check", js, `{"host":"site.test","port":70000}`, false},
		{false, "POST", "/v1/check", js, `{"host":"site.test","port":443,"sha256":"` + big + `"}`, false},
		{false, "POST", "/v1/check", js, `{"host":"site.test","port":443}{}`, false},
		{false, "POST", "/v1/check", js, `{"host":"-bad-","port":443,"ip":"::ffff:999"}`, false},
		{false, "PUT", "/v1/check", js, "{}", false},
		{false, "GET", "/v1/nothing", "", "", false},
		// RFC 6962's API: JSON error bodies.
		{true, "POST", "/ct/v1/add-chain", js, `{"chain":["!!"]}`, false},
		{true, "POST", "/ct/v1/add-chain", js, `{"chain":[]}`, false},
		{true, "POST", "/ct/v1/add-chain", js, `{"chain":["MIIBAA=="]}`, false},
		{true, "POST", "/ct/v1/add-pre-chain", js, `{"chain":["` + big + `"]}`, false},
		{true, "POST", "/ct/v1/add-chain", "application/pkix-cert", "\x30\x82\xff\xff", false},
		{true, "GET", "/ct/v1/get-entries?start=9&end=1", "", "", false},
		{true, "GET", "/ct/v1/get-entries?start=x&end=1", "", "", false},
		{true, "GET", "/ct/v1/get-sth-consistency?first=9&second=1", "", "", false},
		{true, "GET", "/ct/v1/get-proof-by-hash?hash=zz&tree_size=1", "", "", false},
		// static-ct-api's read path: plain 4xx.
		{true, "GET", "/tile/0/x001", "", "", true},
		{true, "GET", "/tile/data/000.p/0", "", "", true},
		{true, "GET", "/tile/99/000", "", "", true},
		{true, "GET", "/tile/0/999", "", "", true},
		{true, "GET", "/issuer/zz", "", "", true},
		{true, "GET", "/tile/0/../../checkpoint", "", "", true},
	}
}

// malformed sends malformed bodies, queries and paths to both services at
// MalformedRate. Each should get a JSON 4xx; the counts say what else came
// back (redirects).
func (a *attack) malformed() {
	a.source = malformedSource
	a.c = newCounters("requests", "json_4xx", "static_4xx", "plain_4xx", "redirects", "overloaded_503", "server_errors", "other_status", "errors", "cut_by_phase_end")
	a.run = func(ctx context.Context) {
		nc := httpClient(a.source, nil, true, 4, 10*time.Second)
		lc := httpClient(a.source, nil, true, 4, 10*time.Second)
		defer nc.CloseIdleConnections()
		defer lc.CloseIdleConnections()
		cases := malformedCases(int(a.w.site.Addr.Port()))
		var i atomic.Int64
		// Four senders, each pausing 4/rate: MalformedRate in all.
		workers(ctx, 4, time.Duration(4*float64(time.Second)/a.sc.MalformedRate), func(ctx context.Context, _ int) {
			mc := cases[int(i.Add(1))%len(cases)]
			base, c := a.w.notaryURL(), nc
			if mc.log {
				base, c = a.w.logURL, lc
			}
			req, err := http.NewRequestWithContext(ctx, mc.method, base+mc.path, strings.NewReader(mc.body))
			if err != nil {
				return
			}
			if mc.ctype != "" {
				req.Header.Set("Content-Type", mc.ctype)
			}
			a.c.add("requests", 1)
			resp, err := c.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					a.c.add("errors", 1)
				} else {
					a.c.add("cut_by_phase_end", 1)
				}
				return
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			switch code := resp.StatusCode; {
			case code >= 300 && code < 400:
				a.c.add("redirects", 1)
			case code >= 400 && code < 500 && mc.static:
				a.c.add("static_4xx", 1)
			case code >= 400 && code < 500:
				if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
					a.c.add("json_4xx", 1)
				} else {
					a.c.add("plain_4xx", 1)
				}
			case code == http.StatusServiceUnavailable:
				// Another attack running at the same time filled the
				// service: a refusal, not a failure to parse.
				a.c.add("overloaded_503", 1)
			case code >= 500:
				a.c.add("server_errors", 1)
			default:
				a.c.add("other_status", 1)
			}
		})
	}
	a.achieved = func() string {
		n := a.c.get("requests") - a.c.get("overloaded_503") - a.c.get("cut_by_phase_end")
		return fmt.Sprintf("%d of %d answered (503s aside) otherwise than with a JSON 4xx (a 4xx on the log's static read path): %d redirects, %d plain-text 4xx, %d other 5xx, %d other, %d transport errors",
			n-a.c.get("json_4xx")-a.c.get("static_4xx"), n, a.c.get("redirects"), a.c.get("plain_4xx"), a.c.get("server_errors"), a.c.get("other_status"), a.c.get("errors"))
	}
}
