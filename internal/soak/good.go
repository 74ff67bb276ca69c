package soak

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkie/pkie/internal/notarywire"
)

// goodKinds are the good requests, sent in turn.
var goodKinds = []struct{ service, name string }{
	{"notary", "convergence cached"},
	{"log", "checkpoint"},
	{"notary", "convergence uncached"},
	{"log", "consistency proof"},
	{"notary", "v1 cached"},
	{"log", "entries"},
	{"notary", "v1 uncached"},
	{"log", "sorted tree"},
	{"notary", "healthz"},
	{"log", "add-chain"},
}

// maxGoodBody bounds an answer the good client reads, as pkie's notary
// client does (1 MiB): a longer one is a failure, as it is for real clients.
const maxGoodBody = 1 << 20

// good sends the good traffic.
type good struct {
	w        *world
	rec      *recorder
	start    time.Time
	timeout  time.Duration
	notary   *http.Client
	log      *http.Client
	inflight sync.WaitGroup
	pending  atomic.Int64
	feedTurn atomic.Int64
}

func newGood(w *world, rec *recorder, start time.Time, timeout time.Duration) *good {
	return &good{w: w, rec: rec, start: start, timeout: timeout,
		notary: httpClient(goodSource, w.notaryCert, false, 0, timeout),
		log:    httpClient(goodSource, nil, false, 0, timeout)}
}

// run sends one request every 1/rate seconds until ctx ends, each in its
// own goroutine: open loop, so a stalled service does not slow the sender.
// A sample's At is when the request was due; its latency counts from when
// it was sent.
func (g *good) run(ctx context.Context, rate float64) {
	// At most every request of one timeout's worth can be waiting; the cap
	// only guards against a bug making requests outlive their timeout.
	maxPending := int64(rate*g.timeout.Seconds()) + 16
	// Requests are due at fixed times from the start, not on a ticker: a
	// ticker drops ticks while this goroutine waits for a CPU, and the
	// rate would fall exactly when the services are under most load. A
	// late request is sent at once.
	interval := time.Duration(float64(time.Second) / rate)
	for i := 0; ; i++ {
		at := time.Duration(i) * interval
		sleep(ctx, time.Until(g.start.Add(at)))
		if ctx.Err() != nil {
			return
		}
		k := goodKinds[i%len(goodKinds)]
		if g.pending.Load() >= maxPending {
			g.rec.add(Sample{At: at, Latency: g.timeout, Service: k.service, Kind: k.name, Failure: "client: too many pending"})
			continue
		}
		g.pending.Add(1)
		g.inflight.Add(1)
		go func() {
			defer g.inflight.Done()
			defer g.pending.Add(-1)
			// A request in flight when the run ends finishes (within its
			// timeout) rather than counting as a failure it was not.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
			defer cancel()
			t0 := time.Now()
			err := g.do(rctx, k.name)
			s := Sample{At: at, Latency: time.Since(t0), Service: k.service, Kind: k.name, OK: err == nil}
			if err != nil {
				s.Failure = failureClass(err)
			}
			g.rec.add(s)
		}()
	}
}

func (g *good) wait() { g.inflight.Wait() }

// statusError is an unexpected HTTP status.
type statusError int

func (e statusError) Error() string { return fmt.Sprintf("status %d", int(e)) }

// badAnswer is a 200 whose body is not what was asked for.
type badAnswer string

func (e badAnswer) Error() string { return "bad answer: " + string(e) }

func (g *good) do(ctx context.Context, kind string) error {
	port := int(g.w.site.Addr.Port())
	switch kind {
	case "convergence cached":
		_, err := g.post(ctx, g.notary, g.w.notaryURL()+fmt.Sprintf("/target/site.test+%d", port),
			"application/x-www-form-urlencoded", "fingerprint="+g.w.siteSHA1)
		return err
	case "convergence uncached":
		_, err := g.post(ctx, g.notary, g.w.notaryURL()+fmt.Sprintf("/target/%s+%d", g.w.freshName(), port),
			"application/x-www-form-urlencoded", "fingerprint="+g.w.siteSHA1)
		return err
	case "v1 cached", "v1 uncached":
		host := "site.test"
		if kind == "v1 uncached" {
			host = g.w.freshName()
		}
		req, _ := json.Marshal(notarywire.Request{Host: host, Port: port, SHA256: g.w.siteSHA2})
		b, err := g.post(ctx, g.notary, g.w.notaryURL()+"/v1/check", "application/json", string(req))
		if err != nil {
			return err
		}
		var resp notarywire.Response
		var ans notarywire.Answer
		if json.Unmarshal(b, &resp) != nil || json.Unmarshal(resp.Answer, &ans) != nil {
			return badAnswer("unparseable v1 answer")
		}
		if ans.Match == nil || !*ans.Match {
			return badAnswer("v1 answer does not match the site's certificate")
		}
		return nil
	case "healthz":
		_, err := g.get(ctx, g.notary, g.w.notaryURL()+"/healthz")
		return err
	case "checkpoint":
		b, err := g.get(ctx, g.log, g.w.logURL+"/checkpoint")
		if err == nil && !bytes.HasPrefix(b, []byte("pkie.soak/log\n")) {
			return badAnswer("not the log's checkpoint")
		}
		return err
	case "consistency proof":
		_, err := g.get(ctx, g.log, fmt.Sprintf("%s/ct/v1/get-sth-consistency?first=%d&second=%d", g.w.logURL, 1+rand.IntN(seedEntries-1), seedEntries))
		return err
	case "entries":
		s := rand.IntN(seedEntries - 8)
		b, err := g.get(ctx, g.log, fmt.Sprintf("%s/ct/v1/get-entries?start=%d&end=%d", g.w.logURL, s, s+7))
		if err != nil {
			return err
		}
		var es struct {
			Entries []json.RawMessage `json:"entries"`
		}
		if json.Unmarshal(b, &es) != nil || len(es.Entries) == 0 {
			return badAnswer("no entries")
		}
		return nil
	case "sorted tree":
		// The head one time in two, the tree file (64 keys at least)
		// the other, as a second mirror or an auditor reads them.
		if g.feedTurn.Add(1)%2 == 0 {
			_, err := g.get(ctx, g.log, g.w.logURL+"/pkie/sorted/head")
			return err
		}
		b, err := g.get(ctx, g.log, g.w.logURL+"/pkie/sorted/tree")
		if err == nil && len(b) < seedEntries*32 {
			return badAnswer(fmt.Sprintf("a tree file of %d bytes", len(b)))
		}
		return err
	case "add-chain":
		chain, err := g.w.freshChain()
		if err != nil {
			return err
		}
		var req struct {
			Chain []string `json:"chain"`
		}
		for _, c := range chain {
			req.Chain = append(req.Chain, base64.StdEncoding.EncodeToString(c))
		}
		body, _ := json.Marshal(req)
		_, err = g.post(ctx, g.log, g.w.logURL+"/ct/v1/add-chain", "application/json", string(body))
		return err
	}
	return fmt.Errorf("soak: unknown kind %q", kind)
}

func (g *good) get(ctx context.Context, c *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return roundTrip(c, req)
}

func (g *good) post(ctx context.Context, c *http.Client, u, ctype, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ctype)
	return roundTrip(c, req)
}

// roundTrip sends req and reads a 200's body, up to maxGoodBody.
func roundTrip(c *http.Client, req *http.Request) ([]byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxGoodBody+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp.StatusCode)
	}
	if len(b) > maxGoodBody {
		return nil, badAnswer("over 1 MiB")
	}
	return b, nil
}

// failureClass names why a request failed, in few enough words that the
// report can count them.
func failureClass(err error) string {
	var se statusError
	var ba badAnswer
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.As(err, &se):
		return se.Error()
	case errors.As(err, &ba):
		return ba.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "out of file descriptors"
	case errors.As(err, &ue):
		return "error: " + ue.Op
	}
	return "error"
}
