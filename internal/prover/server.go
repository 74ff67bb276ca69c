package prover

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/httplimit"
	ctlog "github.com/pkie/pkie/internal/oldctlog"
	"github.com/pkie/pkie/internal/pkies/treeproof"
)

// SCTSource finds the log's SCT for a certificate key; ok is false if the
// log never saw it.
type SCTSource func(ctx context.Context, key [32]byte) (sct *ctwire.SCT, ok bool, err error)

// ServerOptions configure the proof API.
type ServerOptions struct {
	CT         *Prover // nil: no CT endpoint
	Revocation *Prover // nil: no revocation endpoint
	// SCTs looks up SCTs for certificates absent from the sorted tree (the
	// log's /v1/log/sct, via LogSCTs). Nil: absence proofs carry no SCT.
	SCTs SCTSource
	// MaxInFlight bounds concurrent requests; more, or more than a
	// client's share, get 503 at once. Zero means 256.
	MaxInFlight int
	// MaxPerClient is one client address's share of MaxInFlight
	// (httplimit.ClientKey); zero means a quarter.
	MaxPerClient int
	// Timeout bounds one request, SCT lookup included. Zero means 5s.
	Timeout time.Duration
}

// Handler serves the proof API (docs/formats/api-proofs.md):
//
//	GET /v1/ct/proof?key=HEX | ?cert=BASE64URL(DER)
//	GET /v1/revocation/proof?key=HEX
//	GET /v1/status
func Handler(o ServerOptions) http.Handler {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 256
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ct/proof", func(w http.ResponseWriter, r *http.Request) {
		serveProof(w, r, o.CT, o.SCTs)
	})
	mux.HandleFunc("GET /v1/revocation/proof", func(w http.ResponseWriter, r *http.Request) {
		serveProof(w, r, o.Revocation, nil)
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		var st []Status
		for _, p := range []*Prover{o.CT, o.Revocation} {
			if p != nil {
				st = append(st, p.Status())
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"provers": st})
	})
	slots := httplimit.NewSlots(o.MaxInFlight, o.MaxPerClient)
	jm := httplimit.JSONErrors(mux)
	return httplimit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		jm.ServeHTTP(w, r)
	}), httplimit.HandlerOptions{
		Pool:    func(*http.Request) *httplimit.Slots { return slots },
		Timeout: o.Timeout,
	})
}

func serveProof(w http.ResponseWriter, r *http.Request, p *Prover, scts SCTSource) {
	if p == nil {
		writeError(w, http.StatusNotFound, "this server has no prover for that PKIE")
		return
	}
	key, err := requestKey(r, p.PKIE())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	resp, err := p.Prove(key)
	if errors.Is(err, ErrNotSynced) {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if !resp.Present && scts != nil {
		// Best effort: without an SCT the client simply cannot accept
		// the absence, which is the safe side.
		if sct, ok, err := scts(r.Context(), key); err == nil && ok {
			resp.SCT = sct
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// MaxCertParam bounds the cert query parameter: 12 KiB of base64url is a
// 9 KiB certificate, and leaves room for the rest of the request within the
// 16 KiB header limit.
const MaxCertParam = 12 << 10

// requestKey reads ?key=HEX, or for CT ?cert=BASE64URL of the DER.
func requestKey(r *http.Request, pkie string) ([32]byte, error) {
	q := r.URL.Query()
	if s := q.Get("key"); s != "" {
		k, err := treeproof.ParseKey(s)
		return k, err
	}
	if s := q.Get("cert"); s != "" && pkie == CT {
		// The server reads at most 16 KiB of request line and headers
		// (ctlog.NewHTTPServer), so a longer parameter could only arrive
		// through another server; refuse it the same way everywhere.
		if len(s) > MaxCertParam {
			return [32]byte{}, fmt.Errorf("cert parameter of %d characters is over %d; send key= (the SHA-256 of the DER) instead", len(s), MaxCertParam)
		}
		der, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
		if err != nil {
			return [32]byte{}, fmt.Errorf("cert is not unpadded base64url: %w", err)
		}
		return ctlog.CertKey(der), nil
	}
	if pkie == CT {
		return [32]byte{}, errors.New("missing key (64 hex digits: SHA-256 of the certificate DER) or cert parameter")
	}
	return [32]byte{}, errors.New("missing key (64 hex digits: the revocation key)")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

var defaultHTTP = &http.Client{Timeout: 5 * time.Second}

// LogSCTs returns an SCTSource that asks the log at base (its /v1/log/sct
// endpoint).
func LogSCTs(base string, hc *http.Client) SCTSource {
	if hc == nil {
		hc = defaultHTTP
	}
	return func(ctx context.Context, key [32]byte) (*ctwire.SCT, bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/v1/log/sct?key="+treeproof.Key(key).String(), nil)
		if err != nil {
			return nil, false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, false, err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return nil, false, nil
		}
		if resp.StatusCode != http.StatusOK {
			return nil, false, fmt.Errorf("log SCT lookup: %s", resp.Status)
		}
		var out struct {
			SCT *ctwire.SCT `json:"sct"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&out); err != nil || out.SCT == nil {
			return nil, false, fmt.Errorf("log SCT lookup: malformed response")
		}
		return out.SCT, true, nil
	}
}
