// Package ct is the Certificate Transparency enhancement (PEC paper §5.1),
// client half: the verifier, its configuration and the parameters of a ct
// request.
//
// A certificate passes when its SCTs satisfy a CT policy and the logs show
// they kept their promises:
//
//  1. The SCTs are collected from the three places the Web delivers them:
//     embedded in the leaf, the TLS signed_certificate_timestamp extension
//     (pkie.Subject.SCTs) and a stapled OCSP response
//     (pkie.Subject.OCSPResponse).
//  2. Each is verified against the client's own log list: the log must be
//     listed and its signature valid. A CT policy (Chrome's, Apple's, or
//     "one") decides whether the valid ones are enough.
//  3. For each SCT the policy counted, the inclusion evidence the cloud
//     relayed (or, when configured, fetched from the log itself) is
//     verified with the log's key from the list: included under a
//     checkpoint or STH the log signed, a promise (not yet in a tree head,
//     and the SCT younger than the log's maximum merge delay), unknown (no
//     evidence, or the cloud could not reach the log), or failed (a tree
//     head the log signed after the merge deadline without the entry, or
//     with another entry at its leaf_index). With witnesses configured, a
//     static-ct-api checkpoint counts only when a quorum of them cosigned
//     it; one short leaves inclusion unknown, never failed.
//
// A certificate with no SCT at all is judged by a
// sorted-tree mirror of a log (internal/ctmirror): a presence proof under
// a head the mirror signed and bound to a checkpoint the log signed. A
// client pins both keys and trusts neither the prover nor the cloud that
// relays the proof.
//
// The proof body is body.go's (Body); the prover, which fetches inclusion
// evidence and mirrors the log, is server code in internal/provers/ct,
// linked by the cloud only.
package ct

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/pkies/conf"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/sctpolicy"
)

// Name is the enhancement's name.
const Name = treeproof.CT

// Verifier defaults.
const (
	// DefaultMaxAge bounds how old a signed sorted-tree head a client
	// accepts: how long an old proof can be replayed. The prover's health
	// limit defaults to the same value.
	DefaultMaxAge = treeproof.DefaultClientMaxAge
	// DefaultPolicy is the CT policy applied when none is configured.
	DefaultPolicy = "chrome"
)

// Inclusion modes (VerifierConfig.Inclusion).
const (
	// InclusionRequired: the SCTs shown included, or promises still
	// running, must meet the policy by themselves; anything less is
	// Unknown. An SCT beyond what the policy needs whose inclusion is
	// unknown (its log down) is reported, not needed. The default.
	InclusionRequired = "required"
	// InclusionOptional: the policy alone decides a pass, and the reason
	// reports what is known of inclusion. Signed evidence against an SCT
	// still fails.
	InclusionOptional = "optional"
)

// Cache sizes. An SCT verification costs an ECDSA verify, a checkpoint's
// one more; a client that sees the same sites again pays them once.
const (
	sctCacheSize  = 4096
	headCacheSize = 256
	// fetchTimeout bounds a fetch from a log, on top of the caller's
	// context.
	fetchTimeout = 10 * time.Second
	// loadTimeout bounds reading a log list or its signature given as a
	// URL.
	loadTimeout = 30 * time.Second
)

// Duration is a JSON duration string ("1h").
type Duration = conf.Duration

// VerifierConfig configures the verifier (the JSON object of NewVerifier).
// At least one of LogList (the SCT path) and Key (the sorted-tree mirror,
// for certificates without SCTs) is required.
type VerifierConfig struct {
	// LogList is the log list SCTs are checked against: a file (or an
	// http(s) URL, read once when the verifier is built) in Chrome's v3
	// JSON format, which Apple's list shares. The logs' keys, operators,
	// states, temporal intervals and merge delays come from it, never
	// from a proof.
	LogList string `json:"log_list,omitempty"`
	// LogListSignature is the list's detached signature (Chrome's
	// log_list.sig), a file or URL; when set it is checked with
	// LogListPublicKey before the list is used.
	LogListSignature string `json:"log_list_signature,omitempty"`
	// LogListPublicKey is the file of the key LogListSignature is
	// checked with (PEM "PUBLIC KEY", or DER SubjectPublicKeyInfo).
	LogListPublicKey string `json:"log_list_public_key,omitempty"`
	// Policy is the CT policy: "chrome" (the default), "apple" or "one"
	// (at least one valid SCT from a usable listed log).
	Policy string `json:"policy,omitempty"`
	// Inclusion is InclusionRequired (the default) or InclusionOptional.
	Inclusion string `json:"inclusion,omitempty"`
	// Fetch has the client fetch inclusion evidence straight from a log
	// when an SCT the policy counted arrived without any. It tells the
	// log which certificate the client checks (and so, roughly, which
	// site it visits): the PEC cloud exists so that a client need not.
	// Off by default.
	Fetch bool `json:"fetch,omitempty"`
	// Witnesses, when set, are the note verifier keys of witnesses
	// (C2SP tlog-witness) whose cosignatures (cosignature/v1, C2SP
	// tlog-cosignature) a static-ct-api checkpoint must carry before
	// inclusion evidence under it counts: "<name>+<hash>+<base64>", an
	// Ed25519 key in the cosignature/v1 form (algorithm 0x04) or the
	// plain Ed25519 form (0x01) witnesses publish. A checkpoint short of
	// the quorum leaves inclusion unknown, never failed; an RFC 6962
	// log's STH cannot carry cosignatures, so its SCTs' inclusion is
	// unknown too.
	Witnesses []string `json:"witnesses,omitempty"`
	// WitnessQuorum is how many of Witnesses must have cosigned; zero
	// means all of them.
	WitnessQuorum int `json:"witness_quorum,omitempty"`
	// MaxListAge, when set, is the oldest log list (by its
	// log_list_timestamp) whose log states and keys are relied on: past
	// it a log may have been retired or distrusted without the client
	// knowing, and a certificate with SCTs is Unknown until the list is
	// renewed. Chrome's CT policy stops enforcing CT at 70 days
	// (loglist.EnforcementTimeout), and asks other clients to adopt that
	// limit. Zero means no limit.
	MaxListAge Duration `json:"max_list_age,omitzero"`

	// Key is the note verifier key of the sorted-tree mirror that signs
	// the tree's heads (Ed25519); it judges certificates with no SCT.
	// Optional when LogList is set.
	Key string `json:"key,omitempty"`
	// LogKey is the key of the log the mirror follows: the RFC 6962 note
	// key of a static-ct-api or RFC 6962 log ("<origin>+<hash>+<base64>",
	// algorithm 0x05, ECDSA P-256), or an Ed25519 one. The head's bound
	// checkpoint must verify with it. Required with Key.
	LogKey string `json:"log_key,omitempty"`
	// MaxAge is the oldest signed sorted-tree head accepted; zero means
	// 1h.
	MaxAge Duration `json:"max_age,omitzero"`

	// List is a log list already loaded, used instead of reading
	// LogList (an embedder's or a test's); not part of the JSON form.
	List *loglist.List `json:"-"`
	// HTTP is the client that fetches a log list given as a URL and,
	// with Fetch, inclusion evidence from logs; nil means one with a
	// timeout. Not part of the JSON form.
	HTTP *http.Client `json:"-"`
}

// JSON returns c as NewVerifier's configuration.
func (c VerifierConfig) JSON() json.RawMessage { return conf.JSON(c) }

// Kind returns the enhancement's registration, with its client half only:
// the cloud adds the prover (internal/provers/ct) to it.
func Kind() pkie.Kind {
	return pkie.Kind{
		ID:          pkie.CT,
		Name:        Name,
		Summary:     "the certificate's SCTs meet a CT policy and the logs show them included; without SCTs, a mirror's signed sorted tree of a CT log holds it",
		NewVerifier: NewVerifier,
	}
}

// logWord names the log a CT head is built from, in reasons.
const logWord = "the log's checkpoint"

// Verifier checks CT evidence against the client's log list and, for
// certificates without SCTs, the pinned mirror and log keys. It is safe for
// concurrent use.
type Verifier struct {
	list     *loglist.List // nil: no SCT path, the mirror decides
	policy   sctpolicy.Policy
	optional bool
	fetcher  *ctinclusion.Fetcher // nil unless Fetch
	scts     *sct.Cache
	heads    *ctinclusion.Verifier
	// witnesses, when not nil, must have cosigned the checkpoints of
	// inclusion evidence.
	witnesses *ctinclusion.Witnesses
	// maxListAge, when positive, is the oldest list relied on.
	maxListAge time.Duration
	pin        *treeproof.Pin // nil: no mirror
	now        func() time.Time
}

// NewVerifier builds the verifier from a VerifierConfig in JSON.
func NewVerifier(config json.RawMessage) (pkie.Verifier, error) {
	var c VerifierConfig
	if err := conf.Decode(config, &c); err != nil {
		return nil, fmt.Errorf("ct verifier configuration: %w", err)
	}
	return NewVerifierFrom(c)
}

// NewVerifierFrom builds the verifier from c, reading the log list (and
// checking its signature) now.
func NewVerifierFrom(c VerifierConfig) (*Verifier, error) {
	if c.MaxAge == 0 {
		c.MaxAge = Duration(DefaultMaxAge)
	}
	if c.MaxAge <= 0 {
		return nil, fmt.Errorf("%s verifier: max_age must be positive", Name)
	}
	hasList := c.LogList != "" || c.List != nil
	switch {
	case !hasList && c.Key == "" && c.LogKey == "":
		return nil, fmt.Errorf("%s verifier: log_list (the logs SCTs are checked against) or key (a sorted-tree mirror's head key) is required", Name)
	case c.Key == "" && c.LogKey != "":
		return nil, fmt.Errorf("%s verifier: log_key is set but key, the mirror's head key, is not", Name)
	case c.Key != "" && c.LogKey == "":
		return nil, fmt.Errorf("%s verifier: log_key, the key of the log the mirror follows, is required with key", Name)
	case !hasList && (c.LogListSignature != "" || c.LogListPublicKey != "" || c.Policy != "" || c.Inclusion != "" || c.Fetch ||
		len(c.Witnesses) > 0 || c.WitnessQuorum != 0):
		return nil, fmt.Errorf("%s verifier: log_list_signature, log_list_public_key, policy, inclusion, fetch, witnesses and witness_quorum need log_list", Name)
	case (c.LogListSignature == "") != (c.LogListPublicKey == ""):
		return nil, fmt.Errorf("%s verifier: log_list_signature and log_list_public_key go together", Name)
	case c.WitnessQuorum != 0 && len(c.Witnesses) == 0:
		return nil, fmt.Errorf("%s verifier: witness_quorum is set but witnesses, the keys it counts, is not", Name)
	case !hasList && c.MaxListAge != 0:
		return nil, fmt.Errorf("%s verifier: max_list_age needs log_list", Name)
	case c.MaxListAge < 0:
		return nil, fmt.Errorf("%s verifier: max_list_age must be positive", Name)
	case c.WitnessQuorum < 0 || c.WitnessQuorum > len(c.Witnesses):
		return nil, fmt.Errorf("%s verifier: witness_quorum %d: want 1 to %d (the witnesses listed), or 0 for all of them", Name, c.WitnessQuorum, len(c.Witnesses))
	}
	v := &Verifier{now: time.Now}
	if c.Key != "" {
		pin, err := treeproof.ParseMirrorPin(c.Key, c.LogKey, c.MaxAge.D())
		if err != nil {
			return nil, fmt.Errorf("%s verifier: %w", Name, err)
		}
		v.pin = &pin
	}
	if !hasList {
		return v, nil
	}
	v.maxListAge = c.MaxListAge.D()
	switch c.Inclusion {
	case "", InclusionRequired:
	case InclusionOptional:
		v.optional = true
	default:
		return nil, fmt.Errorf("%s verifier: inclusion %q: want %q or %q", Name, c.Inclusion, InclusionRequired, InclusionOptional)
	}
	if c.Policy == "" {
		c.Policy = DefaultPolicy
	}
	p, err := sctpolicy.ByName(c.Policy)
	if err != nil {
		return nil, fmt.Errorf("%s verifier: policy: %w", Name, err)
	}
	v.policy = p
	if len(c.Witnesses) > 0 {
		if v.witnesses, err = ctinclusion.NewWitnesses(c.Witnesses, c.WitnessQuorum); err != nil {
			return nil, fmt.Errorf("%s verifier: witnesses: %w", Name, err)
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: loadTimeout}
	}
	v.list = c.List
	if v.list == nil {
		if v.list, err = loadList(c, hc); err != nil {
			return nil, fmt.Errorf("%s verifier: %w", Name, err)
		}
	}
	if c.Fetch {
		v.fetcher = &ctinclusion.Fetcher{HTTP: hc}
	}
	v.scts = sct.NewCache(sctCacheSize)
	v.heads = ctinclusion.NewVerifier(headCacheSize)
	return v, nil
}

// loadList reads c's log list, checking its signature when one is given.
func loadList(c VerifierConfig, hc *http.Client) (*loglist.List, error) {
	var o loglist.LoadOptions
	if c.LogListSignature != "" {
		der, err := os.ReadFile(c.LogListPublicKey)
		if err != nil {
			return nil, fmt.Errorf("log_list_public_key: %w", err)
		}
		if b, _ := pem.Decode(der); b != nil {
			der = b.Bytes
		}
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return nil, fmt.Errorf("log_list_public_key %s: not a PEM or DER public key: %w", c.LogListPublicKey, err)
		}
		o = loglist.LoadOptions{Signature: c.LogListSignature, PublicKey: pub}
	}
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	l, err := loglist.Load(ctx, hc, c.LogList, o)
	if err != nil {
		return nil, fmt.Errorf("log_list: %w", err)
	}
	return l, nil
}

// ID returns pkie.CT.
func (v *Verifier) ID() pkie.ID { return pkie.CT }

// Verify judges the certificate req.Chain's leaf: by its SCTs, the log list
// and the policy, then the inclusion evidence in req.Proof (see the package
// documentation); with no SCT, by the mirror's sorted-tree proof in
// req.Proof. A missing proof alone never fails a certificate whose SCTs
// meet the policy: it leaves inclusion unknown. So does inclusion evidence
// that does not decode or verify, which proves nothing either way: only a
// tree head the log signed against an SCT fails it. (A sorted-tree proof
// that does not verify fails, as before.)
func (v *Verifier) Verify(ctx context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	if len(req.Chain) == 0 {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no certificate chain to look up in the log"}
	}
	now := req.Now
	if now.IsZero() {
		now = v.now()
	}
	body, bodyErr := openProof(req.Proof)
	if v.list == nil {
		return v.mirror(req, body, bodyErr, now, "")
	}
	leaf := req.Leaf()
	if leaf == nil {
		c, err := x509.ParseCertificate(req.Chain[0])
		if err != nil {
			return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("the leaf certificate does not parse: %v", err)}
		}
		leaf = c
	}
	scts, errs := sct.Collect(leaf, req.SCTs, req.OCSPResponse)
	if len(scts) == 0 {
		return v.mirror(req, body, bodyErr, now, collectNote(errs))
	}
	if v.maxListAge > 0 && v.list.Stale(now, v.maxListAge) {
		return pkie.Assertion{Status: pkie.Unknown, Reason: fmt.Sprintf("the log list %s, published %s, is older than max_list_age (%s): "+
			"SCTs are not judged on log states that may have changed since", v.list.Source, stamp(v.list.Timestamp), age(v.maxListAge))}
	}
	return v.bySCTs(ctx, req, leaf, scts, errs, body, bodyErr, now)
}

// openProof decodes a ct proof: the v3 body, or a v2 sorted-tree body
// alone (an older prover's), as a Body with only its Tree. A nil proof is
// (nil, nil).
func openProof(p *pkie.Proof) (*Body, error) {
	if p == nil {
		return nil, nil
	}
	if p.ID != pkie.CT {
		return nil, fmt.Errorf("proof is for enhancement %s, not %s (%s)", p.ID, pkie.CT, Name)
	}
	if p.Version == treeproof.Version {
		var tb treeproof.Body
		if err := tb.UnmarshalBinary(p.Body); err != nil {
			return nil, fmt.Errorf("%s proof does not decode: %w", Name, err)
		}
		return &Body{Tree: &tb}, nil
	}
	if p.Version != BodyVersion {
		return nil, fmt.Errorf("%s proof of version %d, this client reads versions %d and %d", Name, p.Version, treeproof.Version, BodyVersion)
	}
	var b Body
	if err := b.UnmarshalBinary(p.Body); err != nil {
		return nil, fmt.Errorf("%s proof does not decode: %w", Name, err)
	}
	return &b, nil
}

// collectNote says which SCT sources did not parse, for a reason; "" when
// all did.
func collectNote(errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return " (unreadable SCTs: " + strings.Join(msgs, "; ") + ")"
}

// mirror judges a certificate with no SCT (or a verifier with no log list)
// by the sorted-tree mirror's proof. note is appended to reasons.
func (v *Verifier) mirror(req *pkie.VerifyRequest, body *Body, bodyErr error, now time.Time, note string) pkie.Assertion {
	prefix := ""
	if v.list != nil {
		prefix = "no SCT (embedded, TLS or OCSP), and "
	}
	if v.pin == nil {
		return pkie.Assertion{Status: pkie.Fail, Reason: "no SCT (embedded, TLS or OCSP)" + note}
	}
	who := "mirror " + v.pin.Verifier.Name() + " of log " + v.pin.LogVerifier.Name()
	switch {
	case bodyErr != nil:
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("%s%s: %v%s", prefix, who, bodyErr, note)}
	case body == nil:
		return pkie.Assertion{Status: pkie.Unknown, Reason: prefix + "no CT proof" + note}
	case body.Tree == nil:
		return pkie.Assertion{Status: pkie.Unknown, Reason: prefix + "the CT proof carries no sorted-tree proof from " + who + note}
	}
	res, err := treeproof.VerifyCT(req.Chain, body.Tree.Response(Name), *v.pin, now)
	if err != nil {
		a := pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("%s%s: %v", prefix, who, err)}
		if res != nil {
			a.Reason += " (under " + treeproof.Evidence(*v.pin, res, logWord) + ")"
			a.Time = res.CheckpointTime
		}
		a.Reason += note
		return a
	}
	return pkie.Assertion{Status: pkie.Pass, Time: res.CheckpointTime,
		Reason: "logged: in the sorted tree under " + treeproof.Evidence(*v.pin, res, logWord) + note}
}

// Inclusion findings for one counted SCT.
const (
	found = iota + 1 // included under a signed tree head
	promise
	unknown
	failed
)

// inclusion is what is known of one counted SCT's inclusion.
type inclusion struct {
	state int
	log   *loglist.Log
	size  uint64    // found: the tree head's size
	at    time.Time // found, promise: when the log signed the tree head
	why   string    // promise, unknown, failed: the words for the reason
}

// quorumWords says why a checkpoint of log name does not count under the
// witness policy, for a reason.
func quorumWords(name string, q *ctinclusion.QuorumError) string {
	s := fmt.Sprintf("the checkpoint of log %s is cosigned by %d of the %d witnesses listed, short of the witness quorum of %d",
		name, len(q.Signed), q.Listed, q.Quorum)
	if len(q.Signed) > 0 {
		s += " (cosigned by " + strings.Join(q.Signed, ", ") + ")"
	}
	if len(q.Invalid) > 0 {
		s += "; the cosignature of " + strings.Join(q.Invalid, ", ") + " does not verify"
	}
	return s
}

// bySCTs judges a certificate that carries SCTs.
func (v *Verifier) bySCTs(ctx context.Context, req *pkie.VerifyRequest, leaf *x509.Certificate, scts []*sct.SCT, errs []error,
	body *Body, bodyErr error, now time.Time) pkie.Assertion {
	var issuer *x509.Certificate
	for _, s := range scts {
		if s.Source == sct.Embedded {
			// Only a precertificate entry names the issuer.
			issuer = issuerOf(req)
			break
		}
	}
	checked := make([]sctpolicy.Checked, len(scts))
	entries := make([]*sct.Entry, len(scts))
	for i, s := range scts {
		c := sctpolicy.Checked{SCT: s, Log: v.list.Lookup(s.LogID)}
		switch e, err := sct.EntryFor(s, leaf, issuer); {
		case c.Log == nil:
			c.Err = fmt.Errorf("log %s is not in the log list", hexID(s.LogID))
		case err != nil:
			c.Err = err
		default:
			entries[i] = e
			c.Err = v.scts.Verify(s, e, c.Log.Key)
		}
		checked[i] = c
	}
	res := v.policy.Evaluate(leaf, checked, now)
	if !res.Compliant {
		reason := res.Reason
		if label := policyLabel(res.Policy); strings.HasPrefix(reason, label+": ") {
			reason = label + " not met: " + strings.TrimPrefix(reason, label+": ")
		}
		if embeddedWithoutIssuer(scts, issuer) {
			// Missing data is no evidence against the certificate.
			return pkie.Assertion{Status: pkie.Unknown, Reason: "the embedded SCTs could not be checked: they sign the precertificate, " +
				"which names the issuer's key, and no issuer came with the chain (" + reason + ")" + collectNote(errs)}
		}
		return pkie.Assertion{Status: pkie.Fail, Reason: reason + collectNote(errs)}
	}
	found := v.inclusions(ctx, res.Counted, scts, checked, entries, body, bodyErr, now)
	if res2, found2, surplus, ok := v.withoutUnknown(leaf, res, found, checked, now); ok {
		a := v.decide(res2, found2, checked)
		a.Reason += " (not needed: " + strings.Join(surplus, "; ") + ")"
		return a
	}
	return v.decide(res, found, checked)
}

// withoutUnknown is how inclusion "required" treats a surplus SCT: the
// policy counts every SCT that qualifies, not the fewest that suffice, so
// a log that could not be reached need not leave the verdict unknown when
// the SCTs shown included (or promised) meet the policy by themselves. It
// evaluates the policy again without the SCTs whose inclusion is unknown
// and, when that still complies, returns the smaller result with its
// findings, and the reasons of the SCTs left out; a finding against an
// SCT (failed) is kept either way, so it still decides.
func (v *Verifier) withoutUnknown(leaf *x509.Certificate, res sctpolicy.Result, ins []inclusion,
	checked []sctpolicy.Checked, now time.Time) (sctpolicy.Result, []inclusion, []string, bool) {
	if v.optional {
		return res, ins, nil, false
	}
	var drop []int
	var surplus []string
	for k, in := range ins {
		if in.state == unknown {
			drop = append(drop, res.Counted[k])
			surplus = append(surplus, in.why)
		}
	}
	if len(drop) == 0 || len(drop) == len(ins) {
		return res, ins, nil, false
	}
	fewer := slices.Clone(checked)
	for _, i := range drop {
		fewer[i].Err = errInclusionUnknown
	}
	res2 := v.policy.Evaluate(leaf, fewer, now)
	if !res2.Compliant {
		return res, ins, nil, false
	}
	byIndex := make(map[int]inclusion, len(ins))
	for k, i := range res.Counted {
		byIndex[i] = ins[k]
	}
	ins2 := make([]inclusion, 0, len(res2.Counted))
	for _, i := range res2.Counted {
		in, ok := byIndex[i]
		if !ok {
			// The policy counted an SCT it had not counted before: no
			// finding is at hand, so keep the first result.
			return res, ins, nil, false
		}
		ins2 = append(ins2, in)
	}
	return res2, ins2, surplus, true
}

// errInclusionUnknown marks an SCT the second evaluation of
// withoutUnknown must not count.
var errInclusionUnknown = errors.New("inclusion unknown")

// embeddedWithoutIssuer reports whether scts hold an embedded SCT that
// could not be checked for want of the leaf's issuer.
func embeddedWithoutIssuer(scts []*sct.SCT, issuer *x509.Certificate) bool {
	if issuer != nil {
		return false
	}
	for _, s := range scts {
		if s.Source == sct.Embedded {
			return true
		}
	}
	return false
}

// issuerOf returns the leaf's issuer for rebuilding a precertificate entry:
// from the chain classic validation verified when there is one, else the
// second certificate the server sent. Taking the unverified one is safe
// because the SCT's signature covers the issuer key hash: another issuer
// makes another entry, whose signature does not verify with the log's key
// unless the log signed exactly that entry.
func issuerOf(req *pkie.VerifyRequest) *x509.Certificate {
	for _, ch := range req.VerifiedChains {
		if len(ch) > 1 {
			return ch[1]
		}
	}
	if len(req.Certs) > 1 {
		return req.Certs[1]
	}
	if len(req.Chain) > 1 {
		if c, err := x509.ParseCertificate(req.Chain[1]); err == nil {
			return c
		}
	}
	return nil
}

// inclusions finds, verifies and judges the inclusion evidence of each
// counted SCT, fetching what is missing from the logs when so configured.
func (v *Verifier) inclusions(ctx context.Context, counted []int, scts []*sct.SCT, checked []sctpolicy.Checked, entries []*sct.Entry,
	body *Body, bodyErr error, now time.Time) []inclusion {
	evs := make([]*ctinclusion.Evidence, len(counted))
	fetchErrs := make([]error, len(counted))
	var wg sync.WaitGroup
	for k, i := range counted {
		evs[k] = evidenceFor(body, scts[i])
		if evs[k] != nil || v.fetcher == nil || entries[i] == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
			defer cancel()
			evs[k], fetchErrs[k] = v.fetcher.Fetch(fctx, checked[i].Log, scts[i], entries[i].LeafHash(scts[i]))
		}()
	}
	wg.Wait()
	out := make([]inclusion, len(counted))
	for k, i := range counted {
		s, log := scts[i], checked[i].Log
		in := inclusion{log: log}
		name := logName(log)
		switch ev := evs[k]; {
		case entries[i] == nil:
			// A policy counts only SCTs whose signature verified, which
			// needs the entry; this is a policy's bug, not evidence.
			in.state, in.why = unknown, fmt.Sprintf("the policy counted an SCT from log %s that was not verified", name)
		case fetchErrs[k] != nil && ev == nil:
			in.state, in.why = unknown, fmt.Sprintf("fetching from log %s failed: %v", name, printable(fetchErrs[k].Error()))
		case ev == nil && bodyErr != nil:
			in.state, in.why = unknown, fmt.Sprintf("no evidence for log %s (the CT proof was refused: %v)", name, bodyErr)
		case ev == nil && body == nil:
			in.state, in.why = unknown, fmt.Sprintf("no evidence for log %s (no CT proof)", name)
		case ev == nil:
			in.state, in.why = unknown, fmt.Sprintf("no evidence for log %s in the CT proof", name)
		default:
			in = v.judge(ev, s, log, entries[i].LeafHash(s), now)
		}
		out[k] = in
	}
	return out
}

// evidenceFor returns the body's evidence about s, or nil.
func evidenceFor(body *Body, s *sct.SCT) *ctinclusion.Evidence {
	if body == nil {
		return nil
	}
	h := s.Hash()
	for i := range body.Inclusions {
		if e := &body.Inclusions[i]; e.SCTHash == h && e.LogID == s.LogID {
			return e
		}
	}
	return nil
}

// judge verifies one evidence with the log's key from the list and says
// what it shows about s.
func (v *Verifier) judge(ev *ctinclusion.Evidence, s *sct.SCT, log *loglist.Log, leafHash [32]byte, now time.Time) inclusion {
	name := logName(log)
	in := inclusion{log: log}
	if err := ev.For(s); err != nil {
		in.state, in.why = unknown, fmt.Sprintf("evidence for log %s is not about its SCT: %v", name, err)
		return in
	}
	r, err := v.heads.VerifyWith(ev, log, leafHash, ctinclusion.VerifyOptions{Witnesses: v.witnesses})
	if q, ok := errors.AsType[*ctinclusion.QuorumError](err); ok {
		// Not witnessed is not evidence against: the witnesses may not
		// have cosigned yet, or the relay dropped their lines.
		in.state, in.why = unknown, quorumWords(name, q)
		return in
	}
	if mm, ok := errors.AsType[*ctinclusion.MismatchError](err); ok {
		in.state, in.why = failed, fmt.Sprintf("log %s signed a tree of %s that holds another entry at the SCT's leaf_index %d",
			name, entriesOf(mm.TreeSize), mm.LeafIndex)
		return in
	}
	if err != nil {
		// Bad evidence proves nothing either way: the relay is at fault,
		// not the certificate.
		in.state, in.why = unknown, fmt.Sprintf("evidence for log %s does not verify: %v", name, err)
		return in
	}
	deadline := s.Time().Add(log.MMD)
	switch ctinclusion.Judge(r, log, s.Time(), now) {
	case ctinclusion.Shown:
		in.state, in.size, in.at = found, r.TreeSize, r.CheckpointTime
	case ctinclusion.Broken:
		in.state, in.why = failed, fmt.Sprintf("log %s signed a checkpoint of %s at %s, after the SCT's merge deadline, without the certificate at leaf_index %d",
			name, entriesOf(r.TreeSize), stamp(r.CheckpointTime), ev.LeafIndex)
	case ctinclusion.Promised:
		in.state, in.at = promise, r.CheckpointTime
		in.why = fmt.Sprintf("SCT from %s not yet in a checkpoint, within its %s merge delay (promise)", name, dur(log.MMD))
	default:
		switch r.Status {
		case ctinclusion.LookupFailed:
			in.state, in.why = unknown, fmt.Sprintf("log %s unreachable via the cloud: %s", name, printable(ev.Message))
		case ctinclusion.NotYet:
			in.state, in.why = unknown, fmt.Sprintf("log %s's tree head of %s signed %s does not show the SCT, and its merge deadline passed at %s",
				name, entriesOf(r.TreeSize), stamp(r.CheckpointTime), stamp(deadline))
		default:
			in.state, in.why = unknown, fmt.Sprintf("evidence for log %s says %s", name, r.Status)
		}
	}
	return in
}

// decide turns the policy's result and the inclusion findings into the
// assertion.
func (v *Verifier) decide(res sctpolicy.Result, ins []inclusion, checked []sctpolicy.Checked) pkie.Assertion {
	names := make([]string, len(res.Counted))
	for k, i := range res.Counted {
		names[k] = logName(checked[i].Log)
	}
	met := fmt.Sprintf("%s met by %d SCT%s (%s)", policyLabel(res.Policy), len(names), plural(len(names)), strings.Join(names, ", "))
	var fails, unknowns, promises []string
	var sizes []string
	var oneSize string // the size, when only one SCT is included
	var oldest time.Time
	for _, in := range ins {
		switch in.state {
		case failed:
			fails = append(fails, in.why)
		case unknown:
			unknowns = append(unknowns, in.why)
		case promise:
			promises = append(promises, in.why)
		case found:
			sizes = append(sizes, commas(in.size))
			oneSize = entriesOf(in.size)
		}
		if (in.state == found || in.state == promise) && !in.at.IsZero() && (oldest.IsZero() || in.at.Before(oldest)) {
			oldest = in.at
		}
	}
	if len(fails) > 0 {
		return pkie.Assertion{Status: pkie.Fail, Time: oldest, Reason: met + ", but " + strings.Join(fails, "; ")}
	}
	var parts []string
	switch {
	case len(sizes) == 0:
	case len(sizes) == len(ins) && len(ins) == 2:
		parts = append(parts, fmt.Sprintf("both included (checkpoints of %s and %s entries)", sizes[0], sizes[1]))
	case len(sizes) == len(ins) && len(ins) == 1:
		parts = append(parts, fmt.Sprintf("included (checkpoint of %s)", oneSize))
	case len(sizes) == len(ins):
		parts = append(parts, fmt.Sprintf("all included (checkpoints of %s entries)", andList(sizes)))
	case len(sizes) == 1:
		parts = append(parts, fmt.Sprintf("1 included (checkpoint of %s)", oneSize))
	default:
		parts = append(parts, fmt.Sprintf("%d included (checkpoints of %s entries)", len(sizes), andList(sizes)))
	}
	if v.witnesses != nil && len(sizes) > 0 {
		parts[len(parts)-1] += fmt.Sprintf(", witnessed (each checkpoint cosigned by a quorum of %d of the %d witnesses listed)",
			v.witnesses.Quorum(), v.witnesses.Len())
	}
	parts = append(parts, promises...)
	if len(unknowns) > 0 {
		if !v.optional {
			return pkie.Assertion{Status: pkie.Unknown, Time: oldest, Reason: met + ", but inclusion unknown: " + strings.Join(unknowns, "; ")}
		}
		parts = append(parts, "inclusion unknown: "+strings.Join(unknowns, "; "))
	}
	return pkie.Assertion{Status: pkie.Pass, Time: oldest, Reason: met + ", " + strings.Join(parts, "; ")}
}

// RequestParams returns the parameters of a ct request about s: the SCTs
// the server delivered outside the certificate (the TLS extension's, then
// a stapled OCSP response's), each as received, in a TLS
// SignedCertificateTimestampList (sct.MarshalList), so that the cloud can
// fetch their inclusion evidence. Embedded SCTs are not repeated: the cloud
// reads them from the leaf. It returns nil when there are none.
//
// A client and a PEC server that compute it from the same handshake get
// the same bytes, so a server's submission for the client (pec.Listener)
// and the client's own have one digest. SCTs that do not parse, duplicates,
// those past MaxInclusions and those that would take the list over
// pkie.MaxParams are left out.
func RequestParams(s *pkie.Subject) []byte {
	var raws [][]byte
	size := 2
	add := func(raw []byte) {
		if len(raws) >= MaxInclusions || size+2+len(raw) > pkie.MaxParams {
			return
		}
		for _, r := range raws {
			if bytes.Equal(r, raw) {
				return
			}
		}
		raws = append(raws, raw)
		size += 2 + len(raw)
	}
	for _, raw := range s.SCTs {
		if _, err := sct.Parse(raw, sct.TLSExtension); err == nil {
			add(raw)
		}
	}
	if leaf := s.Leaf(); len(s.OCSPResponse) > 0 && leaf != nil {
		if fromOCSP, err := sct.FromOCSP(s.OCSPResponse, leaf); err == nil {
			for _, x := range fromOCSP {
				add(x.Raw)
			}
		}
	}
	if len(raws) == 0 {
		return nil
	}
	b, err := sct.MarshalList(raws)
	if err != nil {
		return nil
	}
	return b
}

// Helpers for reasons.

// policyLabel names a policy as sctpolicy's reasons do.
func policyLabel(p string) string {
	if p == "one" {
		return "one-SCT policy"
	}
	return p + " CT policy"
}

// logName names a log in reasons: its description from the list (which in
// the published lists names the operator too, as "Google 'Argon2026h1'"),
// else its ID.
func logName(l *loglist.Log) string {
	if l == nil {
		return "(unlisted)"
	}
	return l.Name()
}

// printable is an unsigned relay's message made safe to show: control
// and other non-graphic characters are dropped (escaping them would also
// escape the quotes the message holds, which people read).
func printable(msg string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsGraphic(r) {
			return r
		}
		return -1
	}, msg)
}

func hexID(id [32]byte) string { return loglist.ShortID(id) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// dur renders a merge delay as people write it: "24h", "90m".
func dur(d time.Duration) string {
	switch {
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// age renders a list's age limit: whole days as days, else as dur does.
func age(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return dur(d)
}

// commas renders n with thousands separators: 1,234,567.
func commas(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// entriesOf renders a tree size: "1 entry", "1,234 entries".
func entriesOf(n uint64) string {
	if n == 1 {
		return "1 entry"
	}
	return commas(n) + " entries"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func andList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
