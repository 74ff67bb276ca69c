package notary

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/probe"
)

// maxFormBody caps a Convergence request body: one fingerprint needs 71
// bytes of form data.
const maxFormBody = 4 << 10

// ParseTargetPath parses the Convergence target path "/target/<host>+<port>",
// optionally followed by "/<ip>": the address the client connected to,
// which the maintained Convergence fork appends. That address is checked
// to be an IP literal and then ignored (see docs/formats/api.md): the signed
// Convergence answer cannot say which address it is about, so answering
// for a client-chosen address would let an attacker who steers the
// client's DNS to its own public server have that server's certificate
// vouched for as the name's.
func ParseTargetPath(path string) (host string, port int, err error) {
	rest, ok := strings.CutPrefix(path, "/target/")
	if !ok {
		return "", 0, errors.New("path does not start with /target/")
	}
	rest, ip, hasIP := strings.Cut(rest, "/")
	if hasIP {
		if _, err := netip.ParseAddr(strings.Trim(ip, "[]")); err != nil || strings.Contains(ip, "%") {
			return "", 0, fmt.Errorf("path segment after the target, %q, is not an IP address: the path is /target/<host>+<port>[/<ip>]", clip(ip))
		}
	}
	i := strings.LastIndexByte(rest, '+')
	if i < 0 {
		return "", 0, fmt.Errorf("target %q is not <host>+<port>", clip(rest))
	}
	host, ps := rest[:i], rest[i+1:]
	if err := ValidHost(host); err != nil {
		return "", 0, err
	}
	port, err = strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || ps[0] == '+' || ps[0] == '0' {
		return "", 0, fmt.Errorf("port %q is out of range 1-65535", clip(ps))
	}
	return strings.ToLower(host), port, nil
}

// ValidHost reports whether host is a plausible DNS name or IP literal.
func ValidHost(host string) error {
	if host == "" {
		return errors.New("target host is empty")
	}
	if len(host) > 253 {
		return fmt.Errorf("target host is %d bytes; a DNS name has at most 253", len(host))
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return nil
	}
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("target host %q has an empty or over-long label", clip(host))
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("target host %q contains %q, which a DNS name cannot", clip(host), c)
			}
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]string{"error": msg})
}

// handleTarget serves the Convergence API.
func (n *Notary) handleTarget(w http.ResponseWriter, r *http.Request) {
	code := n.serveTarget(w, r)
	n.metrics.requests.WithLabelValues("convergence", strconv.Itoa(code)).Inc()
}

func (n *Notary) serveTarget(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, POST")
		httpError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use POST to check a fingerprint or GET for the history")
		return http.StatusMethodNotAllowed
	}
	host, port, err := ParseTargetPath(r.URL.EscapedPath())
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return http.StatusBadRequest
	}
	k := store.Key{Host: strings.Trim(host, "[]"), Port: port}
	ctx := r.Context()
	if r.Method == http.MethodGet {
		recs, err := n.lookup(ctx, k)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "history unavailable")
			return http.StatusInternalServerError
		}
		if len(recs) == 0 {
			httpError(w, http.StatusNotFound, "no observations of "+net.JoinHostPort(k.Host, strconv.Itoa(port)))
			return http.StatusNotFound
		}
		return n.writeSigned(w, http.StatusOK, k, recs)
	}

	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", maxFormBody))
			return http.StatusRequestEntityTooLarge
		}
		httpError(w, http.StatusBadRequest, "malformed form body or query string: "+err.Error())
		return http.StatusBadRequest
	}
	fp, msg := requestFingerprint(r)
	if msg != "" {
		httpError(w, http.StatusBadRequest, msg)
		return http.StatusBadRequest
	}
	var want [20]byte
	copy(want[:], fp)

	t := probe.Target{Host: k.Host, Port: port}
	v, err := n.vouch(ctx, clientKey(r), k, t, func(rec store.Record) bool { return rec.SHA1 == want }, false)
	if err != nil {
		return n.probeFailed(w, r, "convergence", t, err)
	}
	code := http.StatusConflict
	if v.match {
		code = http.StatusOK
	}
	return n.writeSigned(w, code, k, v.recs)
}

// requestFingerprint returns the SHA-1 a Convergence POST asks about, or
// why the request does not say one. Like the original notary, whose Twisted
// server merges query and form arguments, it takes the fingerprint from the
// form body or the query string. Every value given, in either, must name the
// same certificate: the signed answer does not repeat which one was checked,
// so a notary that picked one of two would leave the client believing it
// vouched for the other.
func requestFingerprint(r *http.Request) ([]byte, string) {
	vals := append(append([]string(nil), r.PostForm["fingerprint"]...), r.URL.Query()["fingerprint"]...)
	if len(vals) == 0 || vals[0] == "" {
		return nil, "missing fingerprint: send form field (or query parameter) fingerprint=<SHA-1 of the certificate, colon-separated hex>"
	}
	var fp []byte
	for _, v := range vals {
		b, err := probe.ParseColonHex(v, 20)
		if err != nil {
			return nil, "malformed fingerprint: " + err.Error()
		}
		if fp != nil && !bytes.Equal(b, fp) {
			return nil, "conflicting fingerprints: the form body and query string name different certificates; send one"
		}
		fp = b
	}
	return fp, ""
}

// FingerprintList renders records as the exact bytes a Convergence notary
// signs: {"fingerprintList":[{"timestamp":{"start":"…","finish":"…"},"fingerprint":"…"},…]}.
func FingerprintList(recs []store.Record) []byte {
	var b bytes.Buffer
	b.WriteString(`{"fingerprintList":[`)
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"timestamp":{"start":"%d","finish":"%d"},"fingerprint":"%s"}`,
			r.First.Unix(), r.Last.Unix(), probe.ColonHex(r.SHA1[:]))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// SignedBody returns a Convergence response body: the fingerprint list
// followed by its SHA1withRSA signature, laid out so a client can cut the
// body before `, "signature":`, append `}` and verify the exact bytes signed.
func SignedBody(key *rsa.PrivateKey, list []byte) ([]byte, error) {
	sum := sha1.Sum(list)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA1, sum[:])
	if err != nil {
		return nil, fmt.Errorf("notary: signing: %w", err)
	}
	body := make([]byte, 0, len(list)+len(sig)*4/3+24)
	body = append(body, list[:len(list)-1]...)
	body = append(body, `, "signature":"`...)
	body = base64.StdEncoding.AppendEncode(body, sig)
	body = append(body, "\"}\n"...)
	return body, nil
}

func (n *Notary) writeSigned(w http.ResponseWriter, code int, k store.Key, recs []store.Record) int {
	list := FingerprintList(recs)
	body, ok := n.signed.get(string(list))
	if !ok {
		var err error
		if body, err = SignedBody(n.cfg.Identity.RSA, list); err != nil {
			httpError(w, http.StatusInternalServerError, "signing failed")
			return http.StatusInternalServerError
		}
		n.signed.put(string(list), body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
	return code
}
