// Package loglist reads the lists of Certificate Transparency logs that
// browsers trust: Chrome's v3 log list (log_list.json, optionally with its
// detached signature log_list.sig) and Apple's current_log_list.json,
// which uses the same schema with a few top-level fields of its own.
//
// A List maps each log's ID to what a client needs to judge an SCT from
// it: the log's public key (ECDSA P-256 or RSA of at least 2048 bits),
// its operator (CT policies count distinct operators), its API (RFC 6962
// or static-ct-api), its state (Pending, Qualified, Usable, ReadOnly,
// Retired, Rejected) and since when, its maximum merge delay, and the
// temporal interval of certificate expiry dates it accepts.
//
// Parsing is strict where a lax reading would let a list say two things:
// a log whose ID is not SHA-256 of its key, two logs with one ID, a log
// in two states at once, or a temporal interval that ends before it
// starts make the whole list an error.
//
// Chrome's lists are published for CAs, monitors and auditors; their
// acceptable use policy (Chrome's CT log lists page) forbids relying on
// them for CT enforcement in other TLS clients without the Chrome CT
// team's permission. A deployment that enforces CT should use a list it
// may use: Apple's, its own (Write), or Chrome's with permission.
package loglist

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/certificate-transparency-go/loglist3"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
)

// Bounds on what a list may hold. Chrome's all_logs_list.json is about
// 100 kB with about 150 logs; the bounds leave room for growth while
// keeping a hostile list from costing more than a few megabytes.
const (
	// MaxListSize bounds the bytes of a list read by Parse or Load.
	MaxListSize = 8 << 20
	// MaxSignatureSize bounds a detached signature (Chrome's is 512
	// bytes, an RSA-4096 signature).
	MaxSignatureSize = 16 << 10
	// MaxLogs bounds the number of logs in a list.
	MaxLogs = 4096
	// MinRSABits is the smallest RSA log key accepted.
	MinRSABits = 2048
)

// Kind is the API a log serves.
type Kind string

const (
	// RFC6962 is a log serving the RFC 6962 API (the v3 list's "logs").
	RFC6962 Kind = "rfc6962"
	// Static is a log serving the C2SP static-ct-api (the v3 list's
	// "tiled_logs").
	Static Kind = "static-ct-api"
)

// State is a log's state in the list (Chrome's CT log lifecycle; Apple
// uses the same names). The empty State is a log with no state, which
// some lists (all_logs_list.json) carry for logs never submitted.
type State string

const (
	Pending   State = "pending"
	Qualified State = "qualified"
	Usable    State = "usable"
	ReadOnly  State = "readonly"
	Retired   State = "retired"
	Rejected  State = "rejected"
)

// PreviousOperator is an operator a log had before its current one, until
// End (exclusive).
type PreviousOperator struct {
	Name string
	End  time.Time
}

// Log is one CT log of a list.
type Log struct {
	ID          [32]byte         // SHA-256 of SPKI
	Key         crypto.PublicKey // *ecdsa.PublicKey (P-256) or *rsa.PublicKey
	SPKI        []byte           // the key's DER SubjectPublicKeyInfo
	Description string
	Operator    string
	// PreviousOperators are the operators the log had before Operator,
	// oldest first; Chrome's CT policy counts an SCT for the operator of
	// the log at the SCT's time (OperatorAt).
	PreviousOperators []PreviousOperator
	Kind              Kind
	// URL is an RFC 6962 log's base URL, or a static-ct-api log's
	// submission prefix.
	URL string
	// MonitoringURL is a static-ct-api log's monitoring prefix (tiles,
	// checkpoint); empty for RFC 6962 logs.
	MonitoringURL string
	MMD           time.Duration
	State         State
	StateSince    time.Time
	// NotAfterStart and NotAfterEnd are the log's temporal interval: it
	// accepts certificates whose NotAfter is in [NotAfterStart,
	// NotAfterEnd). Both are zero when the log has none.
	NotAfterStart, NotAfterEnd time.Time
	// FinalTreeSize and FinalRootHash are a ReadOnly log's final tree
	// head; zero otherwise.
	FinalTreeSize uint64
	FinalRootHash [32]byte
}

// Name is how a reason names the log: its description, or its ID's first
// eight bytes in hex when it has none.
func (l *Log) Name() string {
	if l.Description != "" {
		return l.Description
	}
	return ShortID(l.ID)
}

// ShortID is a log ID's first eight bytes in hex followed by "…", the
// form reasons use for a log that is not in the list.
func ShortID(id [32]byte) string {
	return hex.EncodeToString(id[:8]) + "…"
}

// Origin is the log's checkpoint origin as static-ct-api defines it: the
// submission prefix without its scheme and trailing slash. It is also the
// key name of the log's signed-note verifier (NoteVerifier), which
// lower-cases it the way transparency-dev/formats does.
func (l *Log) Origin() string {
	o := strings.ToLower(l.URL)
	o = strings.TrimPrefix(o, "https://")
	o = strings.TrimPrefix(o, "http://")
	return strings.TrimSuffix(o, "/")
}

// NoteVerifier returns the verifier of the log's checkpoints: an RFC 6962
// signed-note key (C2SP static-ct-api's RFC6962NoteSignature) named by
// Origin. Only ECDSA P-256 logs have one.
func (l *Log) NoteVerifier() (note.Verifier, error) {
	vkey, err := fnote.RFC6962VerifierString(l.URL, l.Key)
	if err != nil {
		return nil, fmt.Errorf("loglist: note verifier key of log %s: %w", l.Name(), err)
	}
	v, err := checkpoint.NewLogVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("loglist: note verifier of log %s: %w", l.Name(), err)
	}
	return v, nil
}

// Covers reports whether the log's temporal interval admits a certificate
// that expires at notAfter. A log with no interval admits every one.
func (l *Log) Covers(notAfter time.Time) bool {
	if l.NotAfterStart.IsZero() && l.NotAfterEnd.IsZero() {
		return true
	}
	return !notAfter.Before(l.NotAfterStart) && notAfter.Before(l.NotAfterEnd)
}

// OperatorAt is the operator of the log at time t: the first previous
// operator whose end is after t, else the current operator.
func (l *Log) OperatorAt(t time.Time) string {
	for _, p := range l.PreviousOperators {
		if t.Before(p.End) {
			return p.Name
		}
	}
	return l.Operator
}

// List is a parsed log list.
type List struct {
	Source    string // the file or URL it came from; empty for Parse
	Version   string
	Timestamp time.Time
	Logs      []*Log

	byID map[[32]byte]*Log
}

// Lookup returns the log with the given ID, or nil.
func (l *List) Lookup(id [32]byte) *Log {
	if l == nil {
		return nil
	}
	if l.byID != nil {
		return l.byID[id]
	}
	for _, g := range l.Logs {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// Parse reads a log list in Chrome's v3 JSON schema, which Apple's list
// also follows (Apple adds assetVersion and assetVersionV2 at the top and
// a version to each state, which Parse ignores). Both "logs" (RFC 6962)
// and "tiled_logs" (static-ct-api) are read.
func Parse(data []byte) (*List, error) {
	if len(data) > MaxListSize {
		return nil, fmt.Errorf("loglist: list of %d bytes exceeds the %d-byte bound", len(data), MaxListSize)
	}
	ll, err := loglist3.NewFromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("loglist: %w", err)
	}
	return fromLogList(ll)
}

// ParseSigned checks Chrome's detached signature over the list's exact
// bytes (log_list.sig: RSA PKCS#1 v1.5 or ECDSA over SHA-256, verified
// with the published log_list_pubkey.pem) before parsing it.
func ParseSigned(data, sig []byte, pub crypto.PublicKey) (*List, error) {
	if len(data) > MaxListSize {
		return nil, fmt.Errorf("loglist: list of %d bytes exceeds the %d-byte bound", len(data), MaxListSize)
	}
	if len(sig) == 0 || len(sig) > MaxSignatureSize {
		return nil, fmt.Errorf("loglist: signature of %d bytes; want 1 to %d", len(sig), MaxSignatureSize)
	}
	if pub == nil {
		return nil, errors.New("loglist: no public key to check the list's signature")
	}
	ll, err := loglist3.NewFromSignedJSON(data, sig, pub)
	if err != nil {
		return nil, fmt.Errorf("loglist: list signature: %w", err)
	}
	return fromLogList(ll)
}

// ParsePublicKeyPEM parses the PEM "PUBLIC KEY" that signs a list, such
// as Chrome's log_list_pubkey.pem.
func ParsePublicKeyPEM(data []byte) (crypto.PublicKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, errors.New("loglist: no PEM PUBLIC KEY block in the list's public key")
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("loglist: list public key: %w", err)
	}
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSABits {
			return nil, fmt.Errorf("loglist: list public key is RSA-%d; want at least %d bits", k.N.BitLen(), MinRSABits)
		}
	case *ecdsa.PublicKey:
	default:
		return nil, fmt.Errorf("loglist: list public key is a %T; want RSA or ECDSA", pub)
	}
	return pub, nil
}

func fromLogList(ll *loglist3.LogList) (*List, error) {
	out := &List{Version: ll.Version, Timestamp: ll.LogListTimestamp, byID: make(map[[32]byte]*Log)}
	n := 0
	for _, op := range ll.Operators {
		if op == nil {
			return nil, errors.New("loglist: null operator")
		}
		n += len(op.Logs) + len(op.TiledLogs)
	}
	if n > MaxLogs {
		return nil, fmt.Errorf("loglist: %d logs exceeds the bound of %d", n, MaxLogs)
	}
	for oi, op := range ll.Operators {
		if strings.TrimSpace(op.Name) == "" {
			return nil, fmt.Errorf("loglist: operator %d has no name", oi)
		}
		for _, lg := range op.Logs {
			if lg == nil {
				return nil, fmt.Errorf("loglist: operator %q: null log", op.Name)
			}
			l, err := newLog(op.Name, lg.Description, lg.LogID, lg.Key, lg.MMD, lg.State, lg.TemporalInterval, lg.PreviousOperators)
			if err != nil {
				return nil, err
			}
			l.Kind = RFC6962
			if l.URL, err = checkURL(lg.URL); err != nil {
				return nil, fmt.Errorf("loglist: log %s: url: %w", l.Name(), err)
			}
			if err := out.add(l); err != nil {
				return nil, err
			}
		}
		for _, lg := range op.TiledLogs {
			if lg == nil {
				return nil, fmt.Errorf("loglist: operator %q: null tiled log", op.Name)
			}
			l, err := newLog(op.Name, lg.Description, lg.LogID, lg.Key, lg.MMD, lg.State, lg.TemporalInterval, lg.PreviousOperators)
			if err != nil {
				return nil, err
			}
			l.Kind = Static
			if l.URL, err = checkURL(lg.SubmissionURL); err != nil {
				return nil, fmt.Errorf("loglist: log %s: submission_url: %w", l.Name(), err)
			}
			if l.MonitoringURL, err = checkURL(lg.MonitoringURL); err != nil {
				return nil, fmt.Errorf("loglist: log %s: monitoring_url: %w", l.Name(), err)
			}
			if err := out.add(l); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (l *List) add(g *Log) error {
	if prev := l.byID[g.ID]; prev != nil {
		return fmt.Errorf("loglist: logs %q and %q have the same ID %x", prev.Description, g.Description, g.ID)
	}
	l.byID[g.ID] = g
	l.Logs = append(l.Logs, g)
	return nil
}

func newLog(operator, desc string, id, spki []byte, mmd int32, st *loglist3.LogStates, ti *loglist3.TemporalInterval, prev []*loglist3.PreviousOperator) (*Log, error) {
	l := &Log{Operator: operator, Description: desc, SPKI: spki}
	name := desc
	if name == "" {
		name = fmt.Sprintf("%x", id)
	}
	if len(spki) == 0 {
		return nil, fmt.Errorf("loglist: log %q has no key", name)
	}
	if len(id) != sha256.Size {
		return nil, fmt.Errorf("loglist: log %q has a %d-byte log_id; want %d", name, len(id), sha256.Size)
	}
	l.ID = sha256.Sum256(spki)
	if !bytes.Equal(id, l.ID[:]) {
		return nil, fmt.Errorf("loglist: log %q: log_id %x is not SHA-256 of its key (%x)", name, id, l.ID)
	}
	key, err := parseLogKey(spki)
	if err != nil {
		return nil, fmt.Errorf("loglist: log %q: %w", name, err)
	}
	l.Key = key
	if mmd < 0 {
		return nil, fmt.Errorf("loglist: log %q has a negative mmd (%d)", name, mmd)
	}
	l.MMD = time.Duration(mmd) * time.Second
	if st != nil {
		if err := l.setState(st); err != nil {
			return nil, fmt.Errorf("loglist: log %q: %w", name, err)
		}
	}
	if ti != nil {
		if !ti.StartInclusive.Before(ti.EndExclusive) {
			return nil, fmt.Errorf("loglist: log %q: temporal interval [%s, %s) is empty", name, ti.StartInclusive.Format(time.RFC3339), ti.EndExclusive.Format(time.RFC3339))
		}
		l.NotAfterStart, l.NotAfterEnd = ti.StartInclusive, ti.EndExclusive
	}
	for _, p := range prev {
		if p == nil || p.Name == "" {
			return nil, fmt.Errorf("loglist: log %q: previous operator with no name", name)
		}
		l.PreviousOperators = append(l.PreviousOperators, PreviousOperator{Name: p.Name, End: p.EndTime})
	}
	// OperatorAt takes the first previous operator whose end is after the
	// time asked: they must be in order.
	for i := 1; i < len(l.PreviousOperators); i++ {
		if !l.PreviousOperators[i-1].End.Before(l.PreviousOperators[i].End) {
			return nil, fmt.Errorf("loglist: log %q: previous operators are not in order of their end times", name)
		}
	}
	return l, nil
}

// setState takes the log's one state. The schema allows exactly one; a
// list giving two would let a client pick the kinder one.
func (l *Log) setState(st *loglist3.LogStates) error {
	set := 0
	take := func(s State, ls *loglist3.LogState) {
		if ls != nil {
			set++
			l.State, l.StateSince = s, ls.Timestamp
		}
	}
	take(Pending, st.Pending)
	take(Qualified, st.Qualified)
	take(Usable, st.Usable)
	if st.ReadOnly != nil {
		take(ReadOnly, &st.ReadOnly.LogState)
		fth := st.ReadOnly.FinalTreeHead
		if fth.TreeSize < 0 {
			return fmt.Errorf("readonly final tree size %d is negative", fth.TreeSize)
		}
		if len(fth.SHA256RootHash) != 0 && len(fth.SHA256RootHash) != 32 {
			return fmt.Errorf("readonly final root hash has %d bytes; want 32", len(fth.SHA256RootHash))
		}
		l.FinalTreeSize = uint64(fth.TreeSize)
		copy(l.FinalRootHash[:], fth.SHA256RootHash)
	}
	take(Retired, st.Retired)
	take(Rejected, st.Rejected)
	if set > 1 {
		return fmt.Errorf("%d states given; a log has one", set)
	}
	return nil
}

// parseLogKey accepts the keys CT logs may have (RFC 6962 §2.1.4):
// ECDSA on P-256, or RSA of at least MinRSABits.
func parseLogKey(spki []byte) (crypto.PublicKey, error) {
	pub, err := x509.ParsePKIXPublicKey(spki)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("key is ECDSA on %s; want P-256", k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSABits {
			return nil, fmt.Errorf("key is RSA-%d; want at least %d bits", k.N.BitLen(), MinRSABits)
		}
	default:
		return nil, fmt.Errorf("key is a %T; want ECDSA P-256 or RSA", pub)
	}
	return pub, nil
}

func checkURL(s string) (string, error) {
	if s == "" {
		return "", errors.New("missing")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL", s)
	}
	return s, nil
}

// LoadOptions say how Load checks a list.
type LoadOptions struct {
	// Signature is the file or http(s) URL of the list's detached
	// signature; when set, PublicKey is required and the list is refused
	// unless the signature verifies.
	Signature string
	// PublicKey verifies Signature (ParsePublicKeyPEM reads Chrome's).
	PublicKey crypto.PublicKey
}

// DefaultLoadTimeout bounds a Load whose context has no deadline.
const DefaultLoadTimeout = 30 * time.Second

// Load reads a list from a file or an http(s) URL (with hc, or a client
// of its own when nil), at most MaxListSize bytes, and parses it; with
// o.Signature it checks the detached signature first (ParseSigned).
func Load(ctx context.Context, hc *http.Client, src string, o LoadOptions) (*List, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultLoadTimeout)
		defer cancel()
	}
	if o.Signature == "" && o.PublicKey != nil {
		return nil, fmt.Errorf("loglist: a public key but no signature for %s", src)
	}
	if o.Signature != "" && o.PublicKey == nil {
		return nil, fmt.Errorf("loglist: signature %s but no public key to check it", o.Signature)
	}
	data, err := read(ctx, hc, src, MaxListSize)
	if err != nil {
		return nil, err
	}
	var l *List
	if o.Signature != "" {
		sig, err := read(ctx, hc, o.Signature, MaxSignatureSize)
		if err != nil {
			return nil, err
		}
		l, err = ParseSigned(data, sig, o.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
	} else if l, err = Parse(data); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	l.Source = src
	return l, nil
}

func read(ctx context.Context, hc *http.Client, src string, limit int64) ([]byte, error) {
	var r io.Reader
	if strings.HasPrefix(src, "https://") || strings.HasPrefix(src, "http://") {
		if hc == nil {
			hc = &http.Client{}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return nil, fmt.Errorf("loglist: %w", err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("loglist: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("loglist: GET %s: %s", src, resp.Status)
		}
		r = resp.Body
	} else {
		f, err := os.Open(src)
		if err != nil {
			return nil, fmt.Errorf("loglist: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("loglist: reading %s: %w", src, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("loglist: %s exceeds the %d-byte bound", src, limit)
	}
	return data, nil
}
