package notary

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/pkie/pkie/internal/notarywire"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/probe"
)

// maxV1Body caps a v1 request body.
const maxV1Body = 8 << 10

func (n *Notary) handleV1(w http.ResponseWriter, r *http.Request) {
	code := n.serveV1(w, r)
	n.metrics.requests.WithLabelValues("v1", strconv.Itoa(code)).Inc()
}

func (n *Notary) serveV1(w http.ResponseWriter, r *http.Request) int {
	switch r.URL.Path {
	case "/v1/key":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			httpError(w, http.StatusMethodNotAllowed, "use GET")
			return http.StatusMethodNotAllowed
		}
		writeJSON(w, http.StatusOK, map[string]string{
			"notary":  n.cfg.Identity.Name,
			"ed25519": base64.StdEncoding.EncodeToString(n.cfg.Identity.V1.Public().(ed25519.PublicKey)),
		})
		return http.StatusOK
	case "/v1/check":
	default:
		httpError(w, http.StatusNotFound, "no such endpoint; see /v1/check and /v1/key")
		return http.StatusNotFound
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		httpError(w, http.StatusMethodNotAllowed, "use POST with a JSON body")
		return http.StatusMethodNotAllowed
	}
	var req notarywire.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxV1Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", maxV1Body))
			return http.StatusRequestEntityTooLarge
		}
		httpError(w, http.StatusBadRequest, "malformed JSON request: "+err.Error())
		return http.StatusBadRequest
	}
	if _, err := dec.Token(); err != io.EOF {
		httpError(w, http.StatusBadRequest, "trailing data after the JSON request")
		return http.StatusBadRequest
	}
	t, want, err := parseV1Request(&req)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return http.StatusBadRequest
	}
	// What is seen at a pinned address is that address's history, never
	// the name's: otherwise one request pinning an address of the
	// client's choosing would record its certificate as the name's, and
	// later checks of the name would be answered from it.
	k := store.Key{Host: t.Host, Port: t.Port, SNI: t.ServerName, IP: t.IP}
	ctx := r.Context()
	// Without a fingerprint to compare, or when an IP is pinned (so that
	// the answer names the address actually connected to), the answer
	// must come from a probe.
	var is func(store.Record) bool
	if want != nil {
		is = func(rec store.Record) bool { return rec.SHA256 == *want }
	}
	v, err := n.vouch(ctx, clientKey(r), k, t, is, want == nil || t.IP.IsValid())
	if err != nil {
		return n.probeFailed(w, r, "v1", t, err)
	}
	cur := v.rec
	var addr string
	if v.probed && v.obs.Addr.IsValid() {
		addr = v.obs.Addr.String()
	}
	ans := notarywire.Answer{
		Notary: n.cfg.Identity.Name, Host: t.Host, Port: t.Port, SNI: t.ServerName,
		SignedAt: n.now().UTC(), ObservedAt: cur.Last.UTC(), Probed: v.probed,
		Current: hex.EncodeToString(cur.SHA256[:]), Addr: addr,
	}
	if t.IP.IsValid() {
		ans.IP = t.IP.String()
	}
	if want != nil {
		ans.Match = &v.match
	}
	recs := v.recs
	for _, rec := range recs {
		if n.fresh(rec) {
			ans.CurrentSet = append(ans.CurrentSet, hex.EncodeToString(rec.SHA256[:]))
		}
	}
	for _, rec := range recs {
		ans.History = append(ans.History, notarywire.Record{
			SHA256: hex.EncodeToString(rec.SHA256[:]), SHA1: hex.EncodeToString(rec.SHA1[:]),
			FirstSeen: rec.First.UTC(), LastSeen: rec.Last.UTC(),
		})
	}
	ab, err := json.Marshal(ans)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "encoding answer failed")
		return http.StatusInternalServerError
	}
	sig := ed25519.Sign(n.cfg.Identity.V1, notarywire.SignedMessage(ab))
	writeJSON(w, http.StatusOK, notarywire.Response{Answer: ab, Signature: base64.StdEncoding.EncodeToString(sig)})
	return http.StatusOK
}

// parseV1Request checks a v1 request and returns the target and the
// fingerprint asked about, if any.
func parseV1Request(req *notarywire.Request) (probe.Target, *[32]byte, error) {
	t := probe.Target{Host: strings.ToLower(req.Host), Port: req.Port, ServerName: strings.ToLower(req.SNI)}
	if err := ValidHost(t.Host); err != nil {
		return t, nil, err
	}
	// ValidHost accepts a bracketed IPv6 literal, as URLs write it; probe
	// and store it bare, as the Convergence API does, or the prober would
	// try to resolve "[::1]" as a name.
	if ip, err := netip.ParseAddr(strings.Trim(t.Host, "[]")); err == nil {
		t.Host = ip.String()
	}
	if t.ServerName != "" {
		if err := ValidHost(t.ServerName); err != nil {
			return t, nil, fmt.Errorf("sni: %w", err)
		}
	}
	if t.Port < 1 || t.Port > 65535 {
		return t, nil, fmt.Errorf("port %d is out of range 1-65535", t.Port)
	}
	if req.IP != "" {
		ip, err := netip.ParseAddr(req.IP)
		if err != nil {
			return t, nil, fmt.Errorf("ip %q is not an IP address", clip(req.IP))
		}
		// One address, one history key: ::ffff:192.0.2.1 is 192.0.2.1.
		t.IP = ip.Unmap()
	}
	if req.SHA256 == "" {
		return t, nil, nil
	}
	b, err := hex.DecodeString(req.SHA256)
	if err != nil || len(b) != 32 {
		return t, nil, fmt.Errorf("sha256 %q is not 64 hex digits", clip(req.SHA256))
	}
	var want [32]byte
	copy(want[:], b)
	return t, &want, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "encoding failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
