// Package notary is the server half of the notary enhancement
// (internal/pkies/notary is the client's): the prover, a notary of the
// cloud's own (package internal/notary) that probes the target from the
// cloud's network path and answers with its signed v1 response.
package notary

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/notarywire"
	"github.com/pkie/pkie/internal/pkies/conf"
	pkienotary "github.com/pkie/pkie/internal/pkies/notary"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/probe"
)

// Duration is a JSON duration string ("24h").
type Duration = conf.Duration

// ProverConfig configures the prover (the JSON object of NewProver). The
// notary's keys and history live in the host's data directory.
type ProverConfig struct {
	// Name is the notary's name, signed into each answer; empty means
	// "pkie cloud notary". Init writes it into the notary's certificate,
	// which names the notary from then on.
	Name string `json:"name,omitempty"`
	// MaxAge is the notary's freshness window (notary.Config.MaxAge);
	// zero means 24h.
	MaxAge Duration `json:"max_age,omitzero"`
	// ProbeTimeout bounds one probe's connect and handshake; zero means
	// probe.DefaultTimeout.
	ProbeTimeout Duration `json:"probe_timeout,omitzero"`
	// MaxProbes bounds probes in flight; zero means 64. Further requests
	// queue up to 4× that, then get busy at once.
	MaxProbes int `json:"max_probes,omitempty"`
	// MaxProbesPerClient is one requester's share of MaxProbes, and of
	// the queue in the same proportion: the requester is the submitter the
	// cloud names (pkie.Requester: its address, IPv6 per /64), so that one
	// submitter cannot take every probe. Zero means MaxProbes/8, at least
	// 1; more than MaxProbes means MaxProbes.
	MaxProbesPerClient int `json:"max_probes_per_client,omitempty"`
	// Resolve maps "host:port" or "host" to "ip:port" or "ip", as `pkie
	// notary serve --resolve` does: to try named sites on loopback.
	Resolve map[string]string `json:"resolve,omitempty"`
	// AllowPrivate lets the notary probe loopback and private addresses.
	// Off, the probe's SSRF guard refuses them: a cloud must not be made to
	// probe its own network for a client.
	AllowPrivate bool `json:"allow_private,omitempty"`
}

// JSON returns c as NewProver's configuration.
func (c ProverConfig) JSON() json.RawMessage { return conf.JSON(c) }

// Prover answers for a target with its own notary.
type Prover struct {
	n       *notary.Notary
	handler http.Handler
	hist    store.History
	closed  sync.Once
	log     *slog.Logger
}

// NewProver builds the notary prover from a ProverConfig in JSON. Its
// identity is read from env.DataDir, where Init created it; a missing or
// unreadable identity is an error, never replaced. Its history is SQLite in
// the same directory: a cache of observations, so a history that vanished
// is started again empty (CheckHistory logs the loss at error level).
func NewProver(ctx context.Context, env pkie.ProverEnv, config json.RawMessage) (pkie.Prover, error) {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return nil, fmt.Errorf("notary prover configuration: %w", err)
	}
	return NewProverFrom(ctx, env, c)
}

// NewProverFrom is NewProver with a typed configuration.
func NewProverFrom(ctx context.Context, env pkie.ProverEnv, c ProverConfig) (*Prover, error) {
	if env.DataDir == "" {
		return nil, errors.New("notary prover: a data directory is required (its keys and history)")
	}
	if c.MaxAge < 0 || c.ProbeTimeout < 0 || c.MaxProbes < 0 || c.MaxProbesPerClient < 0 {
		return nil, errors.New("notary prover: max_age, probe_timeout, max_probes and max_probes_per_client must not be negative")
	}
	log := env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	id, err := load(env.DataDir) // its error names the notary's keys and their directory
	if err != nil {
		return nil, err
	}
	popts := probe.Options{Timeout: c.ProbeTimeout.D(), AllowPrivate: c.AllowPrivate, Vantage: id.Name}
	if len(c.Resolve) > 0 {
		r, err := parseResolve(c.Resolve)
		if err != nil {
			return nil, fmt.Errorf("notary prover: resolve: %w", err)
		}
		if !c.AllowPrivate {
			for _, aps := range r {
				for _, ap := range aps {
					if why := probe.NonPublic(ap.Addr()); why != "" {
						return nil, fmt.Errorf("notary prover: resolve maps a name to %s (%s), which the probe refuses without allow_private", ap.Addr(), why)
					}
				}
			}
		}
		popts.Lookup = r.lookup
	}
	h, err := store.OpenSQLite(ctx, filepath.Join(env.DataDir, notary.FileHistory))
	if err != nil {
		return nil, fmt.Errorf("notary prover: %w", err)
	}
	maxProbes := c.MaxProbes
	if maxProbes == 0 {
		maxProbes = 64
	}
	n, err := notary.New(notary.Config{
		Identity: id, History: h, Prober: probe.New(popts), MaxAge: c.MaxAge.D(),
		MaxProbes: maxProbes,
		// Each request is counted against its submitter's share (Prove
		// sets the notary's client address from pkie.Requester), and the
		// per-target share keeps one target from taking every probe.
		MaxProbesPerClient: c.MaxProbesPerClient,
		// The pool of requests in progress has no per-submitter share of
		// its own: the cloud's per-address share of submissions
		// (--max-jobs-per-addr) bounds each submitter's requests already,
		// and the probes they need are shared out above.
		MaxRequestsPerClient: 4096,
		HistoryMarker:        filepath.Join(env.DataDir, notary.FileHistorySeen),
		Logger:               log,
	})
	if err != nil {
		h.Close()
		return nil, err
	}
	if _, err := n.CheckHistory(ctx); err != nil {
		h.Close()
		return nil, err
	}
	return &Prover{n: n, handler: n.Handler(), hist: h, log: log}, nil
}

// Init creates the notary's identity in dir, the prover's state directory:
// an Ed25519 v1 key and the RSA key and certificate the notary format
// carries (key files 0600), named by the configuration's Name. It returns
// the v1 public key in base64, as the bundle carries it. It refuses a
// directory that already holds any of the keys: replacing them would make
// every client that pinned the old key fail every notary proof.
//
// Init is the only way the notary's keys come into being (`pkie cloud
// init` calls it); NewProver and PublicKey refuse a directory without them.
func Init(dir string, config json.RawMessage) (string, error) {
	var c ProverConfig
	if len(bytes.TrimSpace(config)) > 0 {
		if err := conf.Decode(config, &c); err != nil {
			return "", fmt.Errorf("notary prover configuration: %w", err)
		}
	}
	if dir == "" {
		return "", errors.New("notary: a state directory is required for its keys")
	}
	name := c.Name
	if name == "" {
		name = "pkie cloud notary"
	}
	id, err := notary.NewIdentity(name, []string{"localhost"})
	if err != nil {
		return "", fmt.Errorf("notary: %w", err)
	}
	if err := id.Save(dir); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(id.V1.Public().(ed25519.PublicKey)), nil
}

// load reads the notary identity in dir. A missing or unreadable identity
// is an error that says how to recover, never a reason to make a new one:
// clients pinned the old v1 key from the cloud's bundle, and a new key
// would turn every site they check UNTRUSTED.
func load(dir string) (*notary.Identity, error) {
	id, err := notary.LoadIdentity(dir)
	if err == nil {
		return id, nil
	}
	// The files notary.Identity.Save writes.
	files := []string{"v1.key", "notary.key", "notary.crt"}
	var missing []string
	for _, f := range files {
		if _, serr := os.Stat(filepath.Join(dir, f)); errors.Is(serr, os.ErrNotExist) {
			missing = append(missing, f)
		}
	}
	const republish = "and republish the cloud's bundle (`pkie cloud bundle`): clients that pinned the old bundle fail every notary proof until they take the new one"
	switch {
	case len(missing) == len(files):
		return nil, fmt.Errorf("no notary keys in %s: the directory was lost, or this data directory was not made by `pkie cloud init`, the only command that creates them. "+
			"Restore the directory from a backup of the cloud's data directory. Only if the keys are lost for good, create new ones with `pkie cloud init --data DATA --new-notary-key` "+republish, dir)
	case len(missing) > 0:
		return nil, fmt.Errorf("the notary keys in %s are incomplete (%s missing). Restore the directory from a backup of the cloud's data directory. Only if the keys are lost for good, "+
			"move the rest aside, create new ones with `pkie cloud init --data DATA --new-notary-key` "+republish, dir, strings.Join(missing, ", "))
	}
	return nil, fmt.Errorf("the notary keys in %s cannot be used (%w). Restore the directory from a backup of the cloud's data directory. Only if the keys are lost for good, "+
		"move them aside, create new ones with `pkie cloud init --data DATA --new-notary-key` "+republish, dir, err)
}

// PublicKey reads the v1 public key of the notary prover whose data
// directory is dir, in base64 as bundles carry it: what `pkie cloud bundle`
// puts in the verifier configuration (VerifierConfig.Key). Keys missing or
// unreadable are an error, as for NewProver.
func PublicKey(dir string) (string, error) {
	id, err := load(dir)
	if err != nil {
		return "", fmt.Errorf("notary: %w", err)
	}
	return base64.StdEncoding.EncodeToString(id.V1.Public().(ed25519.PublicKey)), nil
}

// PublicKey returns the prover's v1 public key in base64.
func (p *Prover) PublicKey() string {
	return base64.StdEncoding.EncodeToString(p.n.Identity().V1.Public().(ed25519.PublicKey))
}

// ID returns pkie.Notary.
func (p *Prover) ID() pkie.ID { return pkie.Notary }

// cloudRemote is the address the notary's limits see for a request that
// names no requester: such requests share one client's share.
const cloudRemote = "[::1]:1"

// remoteOf is the address the notary's per-client shares (which key on
// the request's address, IPv6 per /64) see for a request from requester
// (pkie.Requester): the requester itself when it is an address, or the
// /64 the cloud names IPv6 submitters by; any other key is mapped to a /64
// of its own in fd00::/8, derived from its SHA-256.
func remoteOf(requester string) string {
	if requester == "" {
		return cloudRemote
	}
	if a, err := netip.ParseAddr(requester); err == nil {
		return netip.AddrPortFrom(a.WithZone(""), 0).String()
	}
	if p, err := netip.ParsePrefix(requester); err == nil {
		return netip.AddrPortFrom(p.Masked().Addr(), 0).String()
	}
	sum := sha256.Sum256([]byte(requester))
	var a [16]byte
	a[0] = 0xfd
	copy(a[1:8], sum[:7])
	return netip.AddrPortFrom(netip.AddrFrom16(a), 0).String()
}

// maxAnswer bounds a notary answer kept as a proof.
const maxAnswer = pkie.MaxProofBody

// Prove asks the prover's notary about (ServerName, Port) with the leaf's
// SHA-256, through the notary's own v1 handler, and returns its signed
// response as the proof. The request counts against the share of
// pkie.Requester(ctx) (all requests without one share a single share). A
// notary at capacity, or a requester over its share, is pkie.ErrBusy; a
// target the probe refuses (a private address) is pkie.ErrUnsupported.
func (p *Prover) Prove(ctx context.Context, req *pkie.ProveRequest) (*pkie.Proof, error) {
	if req.ServerName == "" || len(req.Chain) == 0 {
		return nil, fmt.Errorf("%w: the notary needs a server name and the leaf", pkie.ErrUnsupported)
	}
	sum := sha256.Sum256(req.Chain[0])
	q, err := json.Marshal(notarywire.Request{Host: strings.ToLower(req.ServerName), Port: req.Port, SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://notary.invalid/v1/check", bytes.NewReader(q))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.RemoteAddr = remoteOf(pkie.Requester(ctx))
	w := &recorder{header: http.Header{}}
	p.handler.ServeHTTP(w, hr)
	if w.code == 0 {
		w.code = http.StatusOK
	}
	switch {
	case w.code == http.StatusOK:
	case w.code == http.StatusServiceUnavailable && w.header.Get("Retry-After") != "":
		// Only an overloaded notary says when to retry; a 503 without it
		// is a target the probe could not reach.
		return nil, fmt.Errorf("%w: notary: %s", pkie.ErrBusy, errorText(w))
	case w.code == http.StatusForbidden || w.code == http.StatusBadRequest:
		return nil, fmt.Errorf("%w: notary: %s", pkie.ErrUnsupported, errorText(w))
	default:
		return nil, fmt.Errorf("notary: %d: %s", w.code, errorText(w))
	}
	if w.over {
		return nil, fmt.Errorf("notary: answer over %d bytes", maxAnswer)
	}
	return &pkie.Proof{ID: pkie.Notary, Version: pkienotary.Version, Body: bytes.TrimSuffix(w.body.Bytes(), []byte("\n"))}, nil
}

// Run holds the notary's history open until ctx ends, then closes it. The
// notary needs no sync: it probes on demand.
func (p *Prover) Run(ctx context.Context) {
	<-ctx.Done()
	p.Close()
}

// Close closes the notary's history.
func (p *Prover) Close() error {
	var err error
	p.closed.Do(func() { err = p.hist.Close() })
	return err
}

// Health reports a history the notary cannot read.
func (p *Prover) Health() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := p.hist.Lookup(ctx, store.Key{Host: "healthz.invalid", Port: 443}); err != nil {
		return fmt.Errorf("notary prover: history: %w", err)
	}
	return nil
}

func errorText(w *recorder) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(w.body.Bytes(), &e) == nil && e.Error != "" {
		return e.Error
	}
	return http.StatusText(w.code)
}

// recorder is the in-process http.ResponseWriter the notary's handler
// writes its answer to.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
	over   bool
}

func (w *recorder) Header() http.Header { return w.header }
func (w *recorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *recorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.body.Len()+len(b) > maxAnswer {
		w.over = true
		return 0, errors.New("answer too large")
	}
	return w.body.Write(b)
}

// resolves maps "host:port" and "host" to addresses.
type resolves map[string][]netip.AddrPort

func parseResolve(m map[string]string) (resolves, error) {
	r := resolves{}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		v := m[k]
		name := strings.ToLower(strings.TrimSuffix(k, "."))
		if h, p, err := net.SplitHostPort(name); err == nil {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("%q: bad port", k)
			}
			name = net.JoinHostPort(h, p)
		}
		ap, err := netip.ParseAddrPort(v)
		if err != nil {
			ip, err2 := netip.ParseAddr(strings.Trim(v, "[]"))
			if err2 != nil {
				return nil, fmt.Errorf("%q: %q is not an IP or IP:PORT", k, v)
			}
			ap = netip.AddrPortFrom(ip, 0)
		} else if ap.Port() == 0 {
			return nil, fmt.Errorf("%q: port 0 is not a port", k)
		}
		r[name] = append(r[name], netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	}
	return r, nil
}

// lookup answers for the names mapped, the port asked for replacing a
// mapping without one, and refuses the others: a testbed must never fall
// back to DNS.
func (r resolves) lookup(_ context.Context, host string, port int) ([]netip.AddrPort, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	aps, ok := r[net.JoinHostPort(host, strconv.Itoa(port))]
	if !ok {
		aps, ok = r[host]
	}
	if !ok {
		return nil, fmt.Errorf("no resolve entry for %s port %d", host, port)
	}
	out := make([]netip.AddrPort, len(aps))
	for i, ap := range aps {
		if ap.Port() == 0 {
			ap = netip.AddrPortFrom(ap.Addr(), uint16(port))
		}
		out[i] = ap
	}
	return out, nil
}

// CheckProverConfig checks a prover configuration as NewProver reads it,
// creating nothing.
func CheckProverConfig(config json.RawMessage) error {
	var c ProverConfig
	if err := conf.Decode(config, &c); err != nil {
		return fmt.Errorf("notary prover configuration: %w", err)
	}
	if c.MaxAge < 0 || c.ProbeTimeout < 0 || c.MaxProbes < 0 {
		return errors.New("notary prover configuration: max_age, probe_timeout and max_probes must not be negative")
	}
	return nil
}
