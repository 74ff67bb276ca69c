package driver

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/notarywire"
	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// schedule writes a schedule of reqs (and their targets, dead ones marked)
// and returns a reader positioned at its first request.
func schedule(t *testing.T, reqs []replay.Request, dead map[string]bool) *replay.ScheduleReader {
	t.Helper()
	var b bytes.Buffer
	sw, err := replay.NewScheduleWriter(&b, replay.ScheduleHeader{Source: "test", Start: time.Unix(1_400_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var targets []replay.Target
	for _, r := range reqs {
		if err := sw.WriteRequest(r); err != nil {
			t.Fatal(err)
		}
		if !seen[r.Host] {
			seen[r.Host] = true
			targets = append(targets, replay.Target{Host: r.Host, Port: r.Port, Dead: dead[r.Host]})
		}
	}
	for _, tg := range targets {
		if err := sw.WriteTarget(tg); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.WriteSummary(replay.ScheduleSummary{Requests: int64(len(reqs)), Targets: int64(len(targets))}); err != nil {
		t.Fatal(err)
	}
	sr, err := replay.NewScheduleReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	return sr
}

func readRecord(t *testing.T, b []byte) (*replay.RunHeader, *replay.RunEnd, []replay.Result, []replay.NetSample) {
	t.Helper()
	var res []replay.Result
	var nets []replay.NetSample
	h, end, err := replay.ReadRecord(bytes.NewReader(b),
		func(r replay.Result) error { res = append(res, r); return nil },
		func(s replay.NetSample) error { nets = append(nets, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(res, func(i, j int) bool {
		if res[i].Seq != res[j].Seq {
			return res[i].Seq < res[j].Seq
		}
		return res[i].Notary < res[j].Notary
	})
	return h, end, res, nets
}

func req(t time.Duration, client, host string) replay.Request {
	return replay.Request{T: t, Client: netip.MustParseAddr(client), Host: host, Port: 443}
}

// TestReplayAgainstNotaries replays a hand-made schedule against two real
// notaries, one asked over Convergence and one over v1, probing a synthetic
// world: live targets are vouched for (200), probed on the first request
// (miss) and answered from history after (hit); a dead target is 503; a
// target the client saw another certificate at is a conflict.
func TestReplayAgainstNotaries(t *testing.T) {
	dead := map[string]bool{"dead.test": true}
	w, err := testbed.StartWorld(testbed.WorldOptions{Dead: func(h string) bool { return dead[h] }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The client saw a forged certificate at mitm.test: not the world's.
	fps := func(host string, port uint16) ([20]byte, [32]byte, bool) {
		s1, s256, err := w.Fingerprint(host)
		if err != nil {
			t.Error(err)
		}
		if host == "mitm.test" {
			s1[0]++
			s256[0]++
		}
		return s1, s256, true
	}
	sources := LoopbackSources(4)
	var targets []Target
	var locals []*Local
	for _, api := range []string{"convergence", "v1"} {
		l, err := StartLocal(LocalOptions{Name: api, Lookup: w.Lookup, Sources: len(sources),
			Config: notary.Config{MaxReprobes: -1}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		locals = append(locals, l)
		var tg Target
		if api == "v1" {
			// v1 asked on a fresh connection per request; Convergence
			// on pooled ones.
			var v1 *V1Target
			v1, err = NewV1(l.Bundle, fps, 0)
			if err == nil {
				v1.FreshConnections()
			}
			tg = v1
		} else {
			tg, err = NewConvergence(l.Bundle, fps, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, tg)
	}
	// The second round leaves more than two seconds after the first, so
	// the first round's observations are in an earlier second than it
	// (Convergence's cache classification has one-second resolution).
	sr := schedule(t, []replay.Request{
		req(0, "10.0.0.1", "a.test"),
		req(50*time.Millisecond, "10.0.0.2", "b.test"),
		req(100*time.Millisecond, "10.0.0.1", "dead.test"),
		req(150*time.Millisecond, "10.0.0.3", "mitm.test"),
		req(2300*time.Millisecond, "10.0.0.3", "a.test"),
		req(2350*time.Millisecond, "10.0.0.4", "B.test"),
		req(2400*time.Millisecond, "10.0.0.2", "dead.test"),
	}, dead)
	var out bytes.Buffer
	sum, err := Run(context.Background(), Options{
		Schedule: sr, Out: &out, Targets: targets, Sources: sources, Timeout: 5 * time.Second,
		NotaryBytesEach: func() []int64 { return []int64{locals[0].Bytes(), locals[1].Bytes()} },
		ProbeBytes:      w.ProbeBytes,
		Header:          replay.RunHeader{Schedule: "test", API: "mixed"},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, end, res, nets := readRecord(t, out.Bytes())
	if end == nil || end.Interrupted || end.Reached != 2400*time.Millisecond {
		t.Fatalf("end = %+v", end)
	}
	if strings.Join(h.Notaries, ",") != "convergence,v1" {
		t.Errorf("notaries %v", h.Notaries)
	}
	want := []struct{ outcome, cache string }{
		{replay.OutcomeOK, replay.CacheMiss},
		{replay.OutcomeOK, replay.CacheMiss},
		{replay.OutcomeUnavailable, ""},
		{replay.OutcomeConflict, replay.CacheMiss},
		{replay.OutcomeOK, replay.CacheHit},
		{replay.OutcomeOK, replay.CacheHit},
		{replay.OutcomeUnavailable, ""},
	}
	if len(res) != 2*len(want) {
		t.Fatalf("%d results, want %d", len(res), 2*len(want))
	}
	for i, r := range res {
		wn := want[i/2]
		if r.Seq != int64(i/2) || r.Notary != i%2 {
			t.Fatalf("result %d is seq %d notary %d", i, r.Seq, r.Notary)
		}
		if r.Outcome != wn.outcome || r.Cache != wn.cache {
			t.Errorf("seq %d %s on %s: %s/%q (%s), want %s/%q", r.Seq, r.Host, h.Notaries[r.Notary], r.Outcome, r.Cache, r.Error, wn.outcome, wn.cache)
		}
		if r.Outcome == replay.OutcomeUnavailable && r.Status != http.StatusServiceUnavailable {
			t.Errorf("seq %d: status %d", r.Seq, r.Status)
		}
	}
	if sum.Counts[replay.OutcomeOK] != 8 || sum.Counts[replay.OutcomeUnavailable] != 4 || sum.Counts[replay.OutcomeConflict] != 2 || sum.Results != 14 {
		t.Errorf("counts %v, results %d", sum.Counts, sum.Results)
	}
	if len(nets) == 0 {
		t.Fatal("no net samples")
	}
	last := nets[len(nets)-1]
	if last.Where != "listener" || last.NotaryBytes < 14*500 || last.ProbeBytes < 4*500 {
		t.Errorf("last net sample %+v", last)
	}
	if len(last.NotaryBytesEach) != 2 || last.NotaryBytesEach[0]+last.NotaryBytesEach[1] != last.NotaryBytes {
		t.Errorf("per-notary bytes %v do not add up to %d", last.NotaryBytesEach, last.NotaryBytes)
	}
	// Fresh connections: one accepted per request. Pooled: at most one
	// per source address.
	if a := locals[1].Accepts(); a != 7 {
		t.Errorf("the v1 notary (fresh connections) accepted %d connections for 7 requests", a)
	}
	if a := locals[0].Accepts(); a > int64(len(sources)) {
		t.Errorf("the Convergence notary (pooled connections) accepted %d connections from %d sources", a, len(sources))
	}
	if end.PeakInFlight < 1 || end.PeakHeap == 0 {
		t.Errorf("end %+v", end)
	}
}

// slowNotary is an HTTPS server on loopback, pinned in a bundle like a
// notary, that answers nothing until the client gives up.
func slowNotary(t *testing.T) *consensus.Bundle {
	t.Helper()
	id, err := notary.NewIdentity("slow", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := notary.NewServer(id, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	nb := id.Bundle(ap.Addr().String(), int(ap.Port()), 0, "slow", "", "")
	raw, _ := nb.MarshalIndent()
	b, err := consensus.ParseBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenLoop: requests leave on time however long the notary takes to
// answer, each ends in the client's timeout, and the bound on requests in
// flight turns the excess into not_sent without holding the schedule up.
func TestOpenLoop(t *testing.T) {
	b := slowNotary(t)
	fps := func(string, uint16) ([20]byte, [32]byte, bool) { return [20]byte{1}, [32]byte{1}, true }
	tg, err := NewConvergence(b, fps, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()

	t.Run("timeouts", func(t *testing.T) {
		// 40 requests over 0.39 s, each held by the notary until the
		// client's 1 s timeout: all 40 are due within one hold, so an
		// open loop has all 40 in flight at once, each sent on time. A
		// closed loop would take 40 s to send them; one allowing only
		// 4 in flight would send the last at 9 s.
		const n, gap, hold = 40, 10 * time.Millisecond, time.Second
		var reqs []replay.Request
		for i := range n {
			reqs = append(reqs, req(time.Duration(i)*gap, fmt.Sprintf("10.0.0.%d", i), "a.test"))
		}
		var out bytes.Buffer
		sum, err := Run(context.Background(), Options{
			Schedule: schedule(t, reqs, nil), Out: &out, Targets: []Target{tg},
			Timeout: hold, Sources: LoopbackSources(4),
		})
		if err != nil {
			t.Fatal(err)
		}
		_, end, res, _ := readRecord(t, out.Bytes())
		if sum.Counts[replay.OutcomeTimeout] != n || len(res) != n {
			t.Fatalf("counts %v, %d results; want %d timeouts", sum.Counts, len(res), n)
		}
		// Each request left within half a hold of its time: generous
		// for a loaded machine, and still less than the hold, so no
		// request can have waited for another's answer.
		const bound = hold / 2
		for _, r := range res {
			if lag := r.Sent - r.T; lag < 0 || lag > bound {
				t.Errorf("seq %d due at %v left at %v: lag %v, want within [0, %v]", r.Seq, r.T, r.Sent, lag, bound)
			}
			if r.Latency < hold*9/10 {
				t.Errorf("seq %d: latency %v, want the %v hold", r.Seq, r.Latency, hold)
			}
		}
		// Every request is due before the first one's hold ends.
		if dueInHold := int64(min(n, int(hold/gap))); end.PeakInFlight < dueInHold {
			t.Errorf("peak in flight %d, want %d (every request due within one hold): requests waited for answers", end.PeakInFlight, dueInHold)
		}
	})

	t.Run("bound", func(t *testing.T) {
		// 30 requests due at once, room for 10: the rest are not sent.
		var reqs []replay.Request
		for i := range 30 {
			reqs = append(reqs, req(0, fmt.Sprintf("10.0.1.%d", i), "a.test"))
		}
		var out bytes.Buffer
		sum, err := Run(context.Background(), Options{
			Schedule: schedule(t, reqs, nil), Out: &out, Targets: []Target{tg},
			Timeout: time.Second, MaxInFlight: 10,
		})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Counts[replay.OutcomeNotSent] != 20 || sum.Counts[replay.OutcomeTimeout] != 10 {
			t.Fatalf("counts %v; want 20 not_sent, 10 timeouts", sum.Counts)
		}
		_, end, _, _ := readRecord(t, out.Bytes())
		if end.PeakInFlight != 10 {
			t.Errorf("peak in flight %d, want 10", end.PeakInFlight)
		}
	})
}

// cancelOnFirst cancels the run when its first request is sent.
type cancelOnFirst struct {
	Target
	once   sync.Once
	cancel context.CancelFunc
}

func (c *cancelOnFirst) Do(ctx context.Context, r replay.Request, src netip.Addr) Answer {
	c.once.Do(c.cancel)
	return c.Target.Do(ctx, r, src)
}

// TestInterrupt: a cancelled run stops sending, lets the request in flight
// end, and closes the record with Interrupted.
func TestInterrupt(t *testing.T) {
	b := slowNotary(t)
	tg, err := NewConvergence(b, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sr := schedule(t, []replay.Request{
		req(0, "10.0.0.1", "a.test"),
		req(time.Hour, "10.0.0.1", "b.test"),
	}, nil)
	var out bytes.Buffer
	sum, err := Run(ctx, Options{
		Schedule: sr, Out: &out, Targets: []Target{&cancelOnFirst{Target: tg, cancel: cancel}},
		Timeout: 200 * time.Millisecond,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	_, end, res, _ := readRecord(t, out.Bytes())
	if end == nil || !end.Interrupted || end.Reached != 0 {
		t.Fatalf("end %+v", end)
	}
	// The request in flight ran to its timeout, not cut off by the stop.
	if len(res) != 1 || res[0].Outcome != replay.OutcomeTimeout || sum.Results != 1 {
		t.Fatalf("results %+v", res)
	}
}

// forger serves, with the TLS certificate of the notary it impersonates
// (tlsID), answers signed by another notary (signer): a notary key the
// bundle does not pin.
func forger(t *testing.T, tlsID, signer *notary.Identity) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	srv := notary.NewServer(tlsID, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/check" {
			var q notarywire.Request
			json.NewDecoder(r.Body).Decode(&q)
			match := true
			ans := notarywire.Answer{Notary: "forger", Host: q.Host, Port: q.Port, SignedAt: now, ObservedAt: now,
				Probed: true, Current: q.SHA256, CurrentSet: []string{q.SHA256}, Match: &match,
				History: []notarywire.Record{{SHA256: q.SHA256, SHA1: hex.EncodeToString(make([]byte, 20)), FirstSeen: now, LastSeen: now}}}
			ab, _ := json.Marshal(ans)
			sig := ed25519.Sign(signer.V1, notarywire.SignedMessage(ab))
			json.NewEncoder(w).Encode(notarywire.Response{Answer: ab, Signature: base64.StdEncoding.EncodeToString(sig)})
			return
		}
		r.ParseForm()
		fp, _ := probe.ParseColonHex(r.Form.Get("fingerprint"), 20)
		var rec store.Record
		copy(rec.SHA1[:], fp)
		rec.First, rec.Last = now, now
		body, _ := notary.SignedBody(signer.RSA, notary.FingerprintList([]store.Record{rec}))
		w.Write(body)
	}))
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// TestForgedAnswers: an answer is counted only once its signature verifies
// against the bundle's key, and the connection only once the notary shows
// the bundle's certificate.
func TestForgedAnswers(t *testing.T) {
	real, err := notary.NewIdentity("real", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := notary.NewIdentity("other", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	bundle := func(ap netip.AddrPort) *consensus.Bundle {
		nb := real.Bundle(ap.Addr().String(), int(ap.Port()), 0, "real", "", "")
		raw, _ := nb.MarshalIndent()
		b, err := consensus.ParseBundle(raw)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fps := func(string, uint16) ([20]byte, [32]byte, bool) { return [20]byte{7}, [32]byte{7}, true }
	signedByOther := bundle(forger(t, real, other)) // right certificate, wrong signer
	impostor := bundle(forger(t, other, other))     // wrong certificate
	for _, tc := range []struct {
		name    string
		b       *consensus.Bundle
		v1      bool
		outcome string
		err     string
	}{
		{"convergence forged signature", signedByOther, false, replay.OutcomeStatus, "invalid answer"},
		{"v1 forged signature", signedByOther, true, replay.OutcomeStatus, "invalid answer"},
		{"convergence pin mismatch", impostor, false, replay.OutcomeConnError, "pin mismatch"},
		{"v1 pin mismatch", impostor, true, replay.OutcomeConnError, "pin mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tg interface {
				Target
				Close()
			}
			if tc.v1 {
				tg, err = NewV1(tc.b, fps, 0)
			} else {
				tg, err = NewConvergence(tc.b, fps, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a := tg.Do(ctx, req(0, "10.0.0.1", "a.test"), netip.Addr{})
			if a.Outcome != tc.outcome || a.Err == nil || !strings.Contains(a.Err.Error(), tc.err) {
				t.Errorf("answer %+v, want %s with %q", a, tc.outcome, tc.err)
			}
		})
	}
}

// TestConvergenceCacheSameSecond: a request that leaves after another's
// answer showed the observation is a hit, even within the second of the
// observation, where the timestamps alone cannot tell.
func TestConvergenceCacheSameSecond(t *testing.T) {
	w, err := testbed.StartWorld(testbed.WorldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l, err := StartLocal(LocalOptions{Lookup: w.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fps := func(host string, _ uint16) ([20]byte, [32]byte, bool) {
		s1, s256, err := w.Fingerprint(host)
		return s1, s256, err == nil
	}
	tg, err := NewConvergence(l.Bundle, fps, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	ctx := context.Background()
	var got []string
	for range 3 {
		a := tg.Do(ctx, req(0, "10.0.0.1", "same.test"), netip.Addr{})
		got = append(got, a.Outcome+"/"+a.Cache)
	}
	if strings.Join(got, " ") != "ok/miss ok/hit ok/hit" {
		t.Errorf("got %v, want a miss then hits", got)
	}
}

// TestRunSpeedup: Run refuses a speed-up that is not a finite number above
// 0 before writing anything (NaN cannot be written as JSON; ±Inf and
// negative ones make every request due at once or never).
func TestRunSpeedup(t *testing.T) {
	b := slowNotary(t)
	tg, err := NewConvergence(b, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -2} {
		var out bytes.Buffer
		_, err := Run(context.Background(), Options{
			Schedule: schedule(t, []replay.Request{req(0, "10.0.0.1", "a.test")}, nil), Out: &out,
			Targets: []Target{tg}, Speedup: f, Timeout: 100 * time.Millisecond,
		})
		if err == nil || !strings.Contains(err.Error(), "speed-up") || out.Len() != 0 {
			t.Errorf("speed-up %v: err %v, %d bytes written; want a speed-up error and nothing written", f, err, out.Len())
		}
	}
}

// lateTarget hands requests to late.test to its Target only after a delay,
// as a replayer starved of CPU would: the request leaves late.
type lateTarget struct {
	Target
	delay time.Duration
}

func (l *lateTarget) Do(ctx context.Context, r replay.Request, src netip.Addr) Answer {
	if r.Host == "late.test" {
		time.Sleep(l.delay)
	}
	return l.Target.Do(ctx, r, src)
}

// TestRecordedLag: a request leaves when it is handed to the transport, so
// a delay before that is lag, not latency; progress shows the lag recorded
// and counts the results a trace second or more late.
func TestRecordedLag(t *testing.T) {
	w, err := testbed.StartWorld(testbed.WorldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l, err := StartLocal(LocalOptions{Lookup: w.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fps := func(host string, _ uint16) ([20]byte, [32]byte, bool) {
		s1, s256, err := w.Fingerprint(host)
		return s1, s256, err == nil
	}
	tg, err := NewConvergence(l.Bundle, fps, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	const delay = 400 * time.Millisecond
	// At --speedup 10 a trace second is 100 ms: late.test leaves four
	// late. The second request, 1.5 s later, keeps the run going past
	// the first progress report.
	sr := schedule(t, []replay.Request{req(0, "10.0.0.1", "late.test"), req(15*time.Second, "10.0.0.2", "on-time.test")}, nil)
	var mu sync.Mutex
	var progress []Progress
	var out bytes.Buffer
	sum, err := Run(context.Background(), Options{
		Schedule: sr, Out: &out, Targets: []Target{&lateTarget{Target: tg, delay: delay}}, Speedup: 10, Timeout: 5 * time.Second,
		Progress: func(p Progress) { mu.Lock(); progress = append(progress, p); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	_, end, res, _ := readRecord(t, out.Bytes())
	if len(res) != 2 || res[0].Outcome != replay.OutcomeOK || res[1].Outcome != replay.OutcomeOK {
		t.Fatalf("results %+v", res)
	}
	if res[0].Sent < delay {
		t.Errorf("late.test recorded as sent at %v, before the %v it was held back", res[0].Sent, delay)
	}
	if end.MaxLag < delay || sum.Late != 1 {
		t.Errorf("max lag %v, %d late; want at least %v and 1 late", end.MaxLag, sum.Late, delay)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 {
		t.Fatal("no progress")
	}
	p := progress[0]
	if p.RecentMaxLag < delay || p.MaxLag < delay || p.Late != 1 || p.TraceSecond != 100*time.Millisecond {
		t.Errorf("first progress %+v: want the recorded lag (≥ %v) and 1 late of a 100ms trace second", p, delay)
	}
}
