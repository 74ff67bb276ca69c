package consensus

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/notarywire"
)

// v1Notary is a real HTTPS server speaking the v1 API from one fixed
// observation, signing with an Ed25519 key as internal/notary does (the
// answer is built from notarywire.Answer, so field names cannot drift). Its
// modes make it answer in each wrong way a client must refuse.
type v1Notary struct {
	t      *testing.T
	tn     *testNotary // TLS identity and listener
	signer ed25519.PrivateKey
	pinned ed25519.PublicKey // what bundles pin

	mu      sync.Mutex
	mode    string
	sha256  [32]byte // what the notary sees
	sha1    [20]byte
	first   time.Time
	lastReq notarywire.Request
}

func startV1Notary(t *testing.T) *v1Notary {
	t.Helper()
	k, _ := rsaKeys(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n := &v1Notary{t: t, signer: priv, pinned: pub, sha256: [32]byte{0x25, 6}, sha1: [20]byte{0x51}, first: time.Now().Add(-72 * time.Hour)}
	tn := &testNotary{t: t, key: k, signer: k, cert: selfSigned(t, k, "notary.test")}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tn.ln = ln
	tn.srv = &http.Server{Handler: http.HandlerFunc(n.serve), ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{tn.cert.Raw}, PrivateKey: k}}}}
	go tn.srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { tn.srv.Close() })
	n.tn = tn
	return n
}

func (n *v1Notary) bundle(t *testing.T, name string) *Bundle {
	t.Helper()
	b := n.tn.bundle(t, name)
	if err := b.Hosts[0].PinV1(n.pinned); err != nil {
		t.Fatal(err)
	}
	return b
}

func (n *v1Notary) setMode(m string) {
	n.mu.Lock()
	n.mode = m
	n.mu.Unlock()
}

func (n *v1Notary) serve(w http.ResponseWriter, r *http.Request) {
	n.tn.hits.Add(1)
	if r.URL.Path != "/v1/check" || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad request shape", http.StatusBadRequest)
		return
	}
	var req notarywire.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n.mu.Lock()
	n.lastReq = req
	mode, cur, cur1, first := n.mode, n.sha256, n.sha1, n.first
	n.mu.Unlock()
	if mode == "503" {
		http.Error(w, "cannot reach target", http.StatusServiceUnavailable)
		return
	}
	now := time.Now().UTC().Truncate(time.Second)
	ans := notarywire.Answer{
		Notary: "v1", Host: req.Host, Port: req.Port, SNI: req.SNI,
		SignedAt: now, ObservedAt: now.Add(-time.Minute), Current: hex.EncodeToString(cur[:]),
		History: []notarywire.Record{{SHA256: hex.EncodeToString(cur[:]), SHA1: hex.EncodeToString(cur1[:]), FirstSeen: first.UTC(), LastSeen: now.Add(-time.Minute)}},
	}
	if req.SHA256 != "" {
		m := req.SHA256 == ans.Current
		ans.Match = &m
	}
	signer := n.signer
	switch mode {
	case "otherhost":
		ans.Host = "elsewhere.test"
	case "otherport":
		ans.Port++
	case "othersni":
		ans.SNI = "other.test"
	case "stale":
		ans.ObservedAt, ans.History[0].LastSeen = now.Add(-48*time.Hour), now.Add(-48*time.Hour)
	case "future":
		ans.SignedAt, ans.ObservedAt = now.Add(time.Hour), now.Add(time.Hour)
	case "liar":
		m := true
		ans.Match = &m
	case "nomatch":
		ans.Match = nil
	case "otherkey":
		_, signer, _ = ed25519.GenerateKey(rand.Reader)
	}
	ab, err := json.Marshal(ans)
	if err != nil {
		n.t.Error(err)
		return
	}
	sig := ed25519.Sign(signer, notarywire.SignedMessage(ab))
	if mode == "tamper" {
		ab = bytes.Replace(ab, []byte(`"probed":false`), []byte(`"probed":true `), 1)
	}
	body, _ := json.Marshal(notarywire.Response{Answer: ab, Signature: base64.StdEncoding.EncodeToString(sig)})
	if mode == "nosig" {
		body, _ = json.Marshal(map[string]json.RawMessage{"answer": ab})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func TestAskV1(t *testing.T) {
	n := startV1Notary(t)
	mine := n.sha256
	other := [32]byte{0xEE}
	sha1Mine := n.sha1
	c := &Client{}
	defer c.CloseIdleConnections()

	tests := []struct {
		name       string
		mode       string
		api        API
		req        Request
		want       Vote
		wantAPI    API
		wantReason string
		wantSNI    string // sni the notary must have been sent
	}{
		{"yes", "", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, Yes, APIV1, "same certificate (v1)", ""},
		{"no", "", "", Request{Host: "site.test", Port: 443, SHA256: &other}, No, APIV1, "different certificate (v1)", ""},
		{"sni sent when it differs", "", "", Request{Host: "site.test", Port: 443, SNI: "www.site.test", SHA256: &mine}, Yes, APIV1, "same certificate", "www.site.test"},
		{"sni equal to host not sent", "", "", Request{Host: "Site.test", Port: 443, SNI: "site.TEST", SHA256: &mine}, Yes, APIV1, "same certificate", ""},
		{"sha1 only over forced v1", "", APIV1, Request{Host: "site.test", Port: 443, SHA1: &sha1Mine}, Yes, APIV1, "same certificate", ""},
		{"sha1 only over forced v1, different", "", APIV1, Request{Host: "site.test", Port: 443, SHA1: &[20]byte{1}}, No, APIV1, "different certificate", ""},
		{"tampered answer", "tamper", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, APIV1, "signature does not verify", ""},
		{"signed by another key", "otherkey", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, APIV1, "signature does not verify", ""},
		{"no signature", "nosig", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, APIV1, "no signature", ""},
		{"answer about another host", "otherhost", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, APIV1, "about elsewhere.test port 443", ""},
		{"answer about another port", "otherport", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, APIV1, "port 444", ""},
		{"answer about another sni", "othersni", "", Request{Host: "site.test", Port: 443, SNI: "www.site.test", SHA256: &mine}, StandAside, APIV1, `about SNI "other.test"`, "www.site.test"},
		{"stale answer", "stale", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, APIV1, "stale answer: observed_at", ""},
		{"answer from the future", "future", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, APIV1, "from the future", ""},
		{"match contradicting current", "liar", "", Request{Host: "site.test", Port: 443, SHA256: &other}, StandAside, APIV1, "match=true but its current", ""},
		{"no match field", "nomatch", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, APIV1, "has no match", ""},
		{"notary cannot reach target", "503", "", Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, APIV1, "(503)", ""},
		{"forced convergence needs sha1", "", APIConvergence, Request{Host: "site.test", Port: 443, SHA256: &mine}, StandAside, "", "needs the certificate's SHA-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n.setMode(tt.mode)
			c.API = tt.api
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a := c.Ask(ctx, n.bundle(t, "v1"), tt.req)
			if a.Vote != tt.want || a.API != tt.wantAPI || !strings.Contains(a.Reason, tt.wantReason) {
				t.Fatalf("Ask = %s over %q: %q; want %s over %q containing %q", a.Vote, a.API, a.Reason, tt.want, tt.wantAPI, tt.wantReason)
			}
			if a.Vote == Yes && (a.Observed < 71*time.Hour || len(a.History) != 1 || a.History[0].Fingerprint != n.sha1 || a.ObservedAt.IsZero()) {
				t.Fatalf("yes without its history: %+v", a)
			}
			if a.API == APIV1 && tt.mode != "503" {
				n.mu.Lock()
				got := n.lastReq
				n.mu.Unlock()
				if got.SNI != tt.wantSNI || got.Host != strings.ToLower(tt.req.Host) {
					t.Fatalf("notary was asked %+v; want host %q sni %q", got, strings.ToLower(tt.req.Host), tt.wantSNI)
				}
				if a.SigCheck <= 0 {
					t.Fatal("signature check not timed")
				}
			}
		})
	}
	n.setMode("")
	c.API = ""

	t.Run("bundle without a v1 key", func(t *testing.T) {
		b := n.tn.bundle(t, "convergence-only")
		c.API = APIV1
		defer func() { c.API = "" }()
		a := c.Ask(context.Background(), b, Request{Host: "site.test", Port: 443, SHA256: &mine})
		if a.Vote != StandAside || !strings.Contains(a.Reason, "no "+V1FieldName) {
			t.Fatalf("forced v1 without a key = %s %q", a.Vote, a.Reason)
		}
	})
	t.Run("freshness follows the client's max age", func(t *testing.T) {
		strict := &Client{AnswerMaxAge: 30 * time.Second}
		defer strict.CloseIdleConnections()
		a := strict.Ask(context.Background(), n.bundle(t, "v1"), Request{Host: "site.test", Port: 443, SHA256: &mine})
		if a.Vote != StandAside || !strings.Contains(a.Reason, "stale answer") {
			t.Fatalf("observation 1 min old under a 30 s max age = %s %q", a.Vote, a.Reason)
		}
		late := &Client{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }, AnswerMaxAge: time.Hour}
		defer late.CloseIdleConnections()
		a = late.Ask(context.Background(), n.bundle(t, "v1"), Request{Host: "site.test", Port: 443, SHA256: &mine})
		if a.Vote != StandAside || !strings.Contains(a.Reason, "stale answer: signed_at") {
			t.Fatalf("answer signed 2 h ago = %s %q", a.Vote, a.Reason)
		}
	})
	t.Run("bounced", func(t *testing.T) {
		b := n.bundle(t, "B")
		relay := startRelay(t, b.Hosts[0].SSLAddr())
		_, other := rsaKeys(t)
		aHost, err := NewHost("127.0.0.1", 1, relay.ln.Addr().(*net.TCPAddr).Port, selfSigned(t, other, "a.test"))
		if err != nil {
			t.Fatal(err)
		}
		bc := &Client{BounceVia: &Bundle{Version: 1, Name: "A", Hosts: []Host{aHost}}}
		defer bc.CloseIdleConnections()
		a := bc.Ask(context.Background(), b, Request{Host: "site.test", Port: 443, SHA256: &mine})
		if a.Vote != Yes || !a.Bounced || a.API != APIV1 {
			t.Fatalf("bounced v1 Ask = %s bounced=%v api=%s %q", a.Vote, a.Bounced, a.API, a.Reason)
		}
	})
}

func TestParseAPI(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want API
		err  bool
	}{{"", APIAuto, false}, {"auto", APIAuto, false}, {"V1", APIV1, false}, {" convergence", APIConvergence, false}, {"v2", "", true}} {
		got, err := ParseAPI(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ParseAPI(%q) = %q, %v", tt.in, got, err)
		}
	}
}

// fuzzV1Key is a fixed key so that fuzzing explores answers, not keys.
var fuzzV1Key = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

func signedV1(t testing.TB, ans notarywire.Answer) []byte {
	ab, err := json.Marshal(ans)
	if err != nil {
		t.Fatal(err)
	}
	sig := ed25519.Sign(fuzzV1Key, notarywire.SignedMessage(ab))
	body, err := json.Marshal(notarywire.Response{Answer: ab, Signature: base64.StdEncoding.EncodeToString(sig)})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func FuzzVerifyV1(f *testing.F) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cur := strings.Repeat("ab", 32)
	m := true
	good := notarywire.Answer{Notary: "n", Host: "site.test", Port: 443, SignedAt: now, ObservedAt: now.Add(-time.Minute),
		Current: cur, Match: &m, History: []notarywire.Record{{SHA256: cur, SHA1: strings.Repeat("cd", 20), FirstSeen: now.Add(-time.Hour), LastSeen: now}}}
	f.Add(signedV1(f, good))
	noMatch := good
	noMatch.Match = nil
	f.Add(signedV1(f, noMatch))
	pinnedAns := good
	pinnedAns.IP, pinnedAns.Addr, pinnedAns.Probed = "192.0.2.7", "192.0.2.7:443", true
	f.Add(signedV1(f, pinnedAns))
	f.Add([]byte(`{"answer":{},"signature":""}`))
	f.Add([]byte(`{"answer":"x","signature":"AAAA"}`))
	f.Add([]byte(`{}`))
	var want [32]byte
	hex.Decode(want[:], []byte(cur))
	pub := fuzzV1Key.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, body []byte) {
		pinned := netip.MustParseAddr("192.0.2.7")
		for _, q := range []V1Question{{Host: "site.test", Port: 443, SHA256: &want}, {Host: "site.test", Port: 443}, {Host: "site.test", Port: 443, IP: pinned}} {
			a, err := VerifyV1(body, pub, q, now, time.Hour)
			if err != nil {
				if a != nil {
					t.Fatal("answer returned with an error")
				}
				continue
			}
			// Whatever is accepted is signed, about what was asked, fresh,
			// and lists its current certificate.
			var resp notarywire.Response
			if json.Unmarshal(body, &resp) != nil {
				t.Fatal("accepted a body that does not parse as a response")
			}
			if sig, err := base64.StdEncoding.DecodeString(resp.Signature); err != nil || !ed25519.Verify(pub, append([]byte("pkie notary v1 answer\n"), resp.Answer...), sig) {
				t.Fatal("accepted an answer whose signature a plain Ed25519 check rejects")
			}
			if !strings.EqualFold(a.Host, q.Host) || a.Port != q.Port || a.SNI != "" {
				t.Fatalf("accepted an answer about %s:%d sni %q", a.Host, a.Port, a.SNI)
			}
			if ip, err := netip.ParseAddr(a.IP); q.IP.IsValid() && (err != nil || ip != q.IP) || !q.IP.IsValid() && a.IP != "" {
				t.Fatalf("accepted an answer about address %q to a question pinning %v", a.IP, q.IP)
			}
			if now.Sub(a.ObservedAt) > time.Hour || a.ObservedAt.Sub(now) > MaxClockSkew {
				t.Fatalf("accepted observed_at %s", a.ObservedAt)
			}
			if _, ok := a.Find(a.Current); !ok {
				t.Fatal("accepted an answer without its current record")
			}
			if q.SHA256 != nil && (a.Match == nil || *a.Match != (a.Current == cur)) {
				t.Fatal("accepted an inconsistent match")
			}
		}
	})
}

// TestVerifyV1PinnedAddress checks that an answer to a question pinning an
// address is accepted only when it is about that address, and that an
// answer about a pinned address is never taken for one about the name.
func TestVerifyV1PinnedAddress(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cur := strings.Repeat("ab", 32)
	base := notarywire.Answer{Notary: "n", Host: "site.test", Port: 443, SignedAt: now, ObservedAt: now.Add(-time.Minute),
		Current: cur, History: []notarywire.Record{{SHA256: cur, SHA1: strings.Repeat("cd", 20), FirstSeen: now.Add(-time.Hour), LastSeen: now}}}
	pub := fuzzV1Key.Public().(ed25519.PublicKey)
	pin := netip.MustParseAddr("192.0.2.7")
	for _, tc := range []struct {
		name     string
		q        netip.Addr
		ip, addr string
		probed   bool
		err      string // "" accepts
	}{
		{"name, from history", netip.Addr{}, "", "", false, ""},
		{"name, probed", netip.Addr{}, "", "198.51.100.1:443", true, ""},
		{"name answered about a pinned address", netip.Addr{}, "203.0.113.66", "203.0.113.66:443", true, "not about the name"},
		{"pinned", pin, "192.0.2.7", "192.0.2.7:443", true, ""},
		{"pinned, IPv4-mapped echo", pin, "::ffff:192.0.2.7", "[::ffff:192.0.2.7]:443", true, ""},
		{"pinned answered about the name", pin, "", "192.0.2.7:443", true, "names no pinned address"},
		{"pinned answered about another address", pin, "203.0.113.66", "", false, "not the pinned"},
		{"pinned, probed elsewhere", pin, "192.0.2.7", "203.0.113.66:443", true, "not at the pinned"},
		{"pinned, probed at another port", pin, "192.0.2.7", "192.0.2.7:8443", true, "not at the pinned"},
		{"pinned, probed but no addr", pin, "192.0.2.7", "", true, "does not say"},
		{"garbage addr", netip.Addr{}, "", "nowhere", true, "not an address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := base
			a.IP, a.Addr, a.Probed = tc.ip, tc.addr, tc.probed
			_, err := VerifyV1(signedV1(t, a), pub, V1Question{Host: "site.test", Port: 443, IP: tc.q}, now, time.Hour)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
}
