package prover

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/pkies/treeproof"
)

// Source is what the proof API serves from: a Prover (a mirror of a TTP's
// sorted-tree feed), or a CT mirror of any log (internal/provers/ct's
// Mirror).
type Source interface {
	PKIE() string
	Prove(key [32]byte) (*treeproof.Response, error) // ErrNotSynced before a tree
	Status() Status
}

// ServerOptions configure the proof API.
type ServerOptions struct {
	CT         Source // nil: no CT endpoint
	Revocation Source // nil: no revocation endpoint
	// MaxInFlight bounds concurrent requests; more, or more than a
	// client's share, get 503 at once. Zero means 256.
	MaxInFlight int
	// MaxPerClient is one client address's share of MaxInFlight
	// (httplimit.ClientKey); zero means a quarter.
	MaxPerClient int
	// Timeout bounds one request. Zero means 5s.
	Timeout time.Duration
}

// Handler serves the proof API (docs/formats/api-proofs.md):
//
//	GET /v1/ct/proof?key=HEX | ?cert=BASE64URL(DER)[&cert=BASE64URL(issuer DER)]
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
		serveProof(w, r, o.CT)
	})
	mux.HandleFunc("GET /v1/revocation/proof", func(w http.ResponseWriter, r *http.Request) {
		serveProof(w, r, o.Revocation)
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		var st []Status
		for _, p := range []Source{o.CT, o.Revocation} {
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

func serveProof(w http.ResponseWriter, r *http.Request, p Source) {
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
	writeJSON(w, http.StatusOK, resp)
}

// MaxCertParam bounds the cert query parameter: 12 KiB of base64url is a
// 9 KiB certificate, and leaves room for the rest of the request within the
// 16 KiB header limit.
const MaxCertParam = 12 << 10

// requestKey reads ?key=HEX, or for CT ?cert=BASE64URL of the DER, once
// for the leaf and again for its issuer (needed when the leaf carries
// embedded SCTs: the key is then its precertificate's, ctwire.ChainKey).
func requestKey(r *http.Request, pkie string) ([32]byte, error) {
	q := r.URL.Query()
	if s := q.Get("key"); s != "" {
		k, err := treeproof.ParseKey(s)
		return k, err
	}
	if certs := q["cert"]; len(certs) > 0 && pkie == CT {
		// The server reads at most 16 KiB of request line and headers
		// (ctlog.NewHTTPServer), so a longer parameter could only arrive
		// through another server; refuse it the same way everywhere.
		if len(certs) > 2 {
			return [32]byte{}, fmt.Errorf("%d cert parameters; send the leaf and at most its issuer", len(certs))
		}
		total := 0
		var chain [][]byte
		for _, s := range certs {
			total += len(s)
			if total > MaxCertParam {
				return [32]byte{}, fmt.Errorf("cert parameters of over %d characters; send key= (ctwire.ChainKey of the chain) instead", MaxCertParam)
			}
			der, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
			if err != nil {
				return [32]byte{}, fmt.Errorf("cert is not unpadded base64url: %w", err)
			}
			chain = append(chain, der)
		}
		return ctwire.ChainKey(chain)
	}
	if pkie == CT {
		return [32]byte{}, errors.New("missing key (64 hex digits: the certificate's key, ctwire.ChainKey) or cert parameter")
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
