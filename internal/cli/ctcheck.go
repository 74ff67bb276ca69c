package cli

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/sctpolicy"
)

const ctCheckUsage = "CERT.pem [ISSUER.pem] --log-list FILE|URL [--log-list-sig F --log-list-key F] [--policy chrome|apple|one]\n" +
	"                    [--ocsp RESP.der] [--sct-list F] [--inclusion] [--json]\n\n" +
	"Checks a certificate's SCTs offline against a CT log list and a CT policy: the SCTs embedded in\n" +
	"CERT.pem's leaf, those of a TLS signed_certificate_timestamp extension (--sct-list: the\n" +
	"SignedCertificateTimestampList as sent, binary) and those of a stapled OCSP response (--ocsp,\n" +
	"DER). Each SCT is printed with its source, its log (description and ID), its time and whether\n" +
	"its signature verifies with the log's key from the list; then the policy's verdict (Chrome's\n" +
	"CT policy by default, Apple's, or \"one\": one valid SCT from a usable log).\n\n" +
	"Embedded SCTs sign the precertificate, which names the issuer's key: give ISSUER.pem, or put\n" +
	"the issuer after the leaf in CERT.pem (PEM or DER).\n\n" +
	"--inclusion asks each SCT's log for the entry's inclusion proof (static-ct-api tiles, or RFC\n" +
	"6962 get-proof-by-hash) and verifies it against a checkpoint the log signed: included, promise\n" +
	"(not yet in a checkpoint, younger than the log's maximum merge delay), unknown (the log could\n" +
	"not be asked) or fail (the log's signed tree holds another entry where the SCT says its entry\n" +
	"is, or a checkpoint it signed after the merge delay still lacks it). Asking tells each log\n" +
	"which certificate you are checking.\n\n" +
	"Exit status: 0 compliant (and with --inclusion, no log's signed tree contradicts an SCT); 1 not\n" +
	"compliant, or contradicted; 2 usage or input error."

// ctCheckReport is what "pkie ct check" found, as --json prints it.
type ctCheckReport struct {
	Certificate string       `json:"certificate"` // the leaf's subject
	SHA256      string       `json:"sha256"`      // of the leaf's DER
	LogList     string       `json:"log_list"`
	Policy      string       `json:"policy"`
	Compliant   bool         `json:"compliant"`
	Reason      string       `json:"reason"`
	SCTs        []ctCheckSCT `json:"scts"`
	// SourceErrors are the places SCTs could not be read from (a
	// malformed list, an OCSP response for another certificate).
	SourceErrors []string `json:"source_errors,omitempty"`
	// Contradicted is set when a log's signed tree holds another entry
	// where one of the SCTs says its entry is.
	Contradicted bool `json:"contradicted,omitempty"`
}

// ctCheckSCT is one SCT.
type ctCheckSCT struct {
	Source    string            `json:"source"` // embedded, tls, ocsp
	LogID     string            `json:"log_id"` // hex
	Log       string            `json:"log,omitempty"`
	Operator  string            `json:"operator,omitempty"`
	LogState  string            `json:"log_state,omitempty"`
	Listed    bool              `json:"listed"`
	Time      time.Time         `json:"time"`
	Valid     bool              `json:"valid"`
	Error     string            `json:"error,omitempty"` // why not valid
	Counted   bool              `json:"counted"`         // the policy counted it
	Inclusion *ctCheckInclusion `json:"inclusion,omitempty"`
}

// ctCheckInclusion is what the SCT's log said about its entry.
type ctCheckInclusion struct {
	Status         string    `json:"status"` // included, promise, unknown, fail
	LeafIndex      uint64    `json:"leaf_index,omitempty"`
	TreeSize       uint64    `json:"tree_size,omitempty"`
	CheckpointTime time.Time `json:"checkpoint_time,omitzero"`
	Detail         string    `json:"detail"`
}

// ctCheckInput is what the command checks.
type ctCheckInput struct {
	Leaf, Issuer *x509.Certificate
	TLS          [][]byte // the TLS extension's SCTs
	OCSP         []byte
	List         *loglist.List
	Policy       sctpolicy.Policy
	Inclusion    *ctinclusion.Fetcher // nil: do not ask the logs
	Now          time.Time
}

// checkSCTs collects the leaf's SCTs, verifies each against the list,
// applies the policy and, with a Fetcher, asks each valid SCT's log for
// its entry.
func checkSCTs(ctx context.Context, in ctCheckInput) *ctCheckReport {
	sum := sha256.Sum256(in.Leaf.Raw)
	r := &ctCheckReport{Certificate: in.Leaf.Subject.String(), SHA256: hex.EncodeToString(sum[:]), LogList: in.List.Source}
	scts, errs := sct.Collect(in.Leaf, in.TLS, in.OCSP)
	for _, err := range errs {
		r.SourceErrors = append(r.SourceErrors, err.Error())
	}
	checked := make([]sctpolicy.Checked, len(scts))
	entries := make([]*sct.Entry, len(scts))
	for i, s := range scts {
		c := sctpolicy.Checked{SCT: s, Log: in.List.Lookup(s.LogID)}
		out := ctCheckSCT{Source: s.Source.String(), LogID: hex.EncodeToString(s.LogID[:]), Time: s.Time()}
		if c.Log == nil {
			c.Err = errors.New("its log is not in the log list")
		} else {
			out.Listed, out.Log, out.Operator, out.LogState = true, c.Log.Name(), c.Log.OperatorAt(s.Time()), string(c.Log.State)
			e, err := sct.EntryFor(s, in.Leaf, in.Issuer)
			if err == nil {
				entries[i] = e
				err = sct.Verify(s, e, c.Log.Key)
			}
			c.Err = err
		}
		out.Valid = c.Err == nil
		if c.Err != nil {
			out.Error = c.Err.Error()
		}
		checked[i] = c
		r.SCTs = append(r.SCTs, out)
	}
	res := in.Policy.Evaluate(in.Leaf, checked, in.Now)
	r.Policy, r.Compliant, r.Reason = res.Policy, res.Compliant, res.Reason
	for _, i := range res.Counted {
		if i >= 0 && i < len(r.SCTs) {
			r.SCTs[i].Counted = true
		}
	}
	if in.Inclusion == nil {
		return r
	}
	for i, s := range scts {
		if !r.SCTs[i].Valid {
			continue
		}
		inc := inclusionOf(ctx, in.Inclusion, checked[i].Log, s, entries[i].LeafHash(s), in.Now)
		if inc.Status == "fail" {
			r.Contradicted = true
		}
		r.SCTs[i].Inclusion = inc
	}
	return r
}

// inclusionOf asks log for s's entry and says what the answer means. A
// lookup that failed is unknown, never fail: only the log's signature on
// a tree that holds another entry, or that leaves the entry out after the
// log's maximum merge delay, is evidence against the SCT.
func inclusionOf(ctx context.Context, f *ctinclusion.Fetcher, log *loglist.Log, s *sct.SCT, leafHash [32]byte, now time.Time) *ctCheckInclusion {
	out := &ctCheckInclusion{}
	deadline := s.Time().Add(log.MMD)
	e, err := f.Fetch(ctx, log, s, leafHash)
	var mismatch *ctinclusion.MismatchError
	switch {
	case errors.As(err, &mismatch):
		out.Status, out.LeafIndex, out.TreeSize = "fail", mismatch.LeafIndex, mismatch.TreeSize
		out.Detail = fmt.Sprintf("log %s signed a tree of %d entries holding another entry at the SCT's leaf index %d", log.Name(), mismatch.TreeSize, mismatch.LeafIndex)
		return out
	case err != nil || e == nil:
		out.Status = "unknown"
		out.Detail = fmt.Sprintf("could not ask log %s: %v", log.Name(), err)
		return out
	}
	res, err := ctinclusion.Verify(e, log, leafHash)
	if err != nil {
		out.Status, out.Detail = "unknown", fmt.Sprintf("log %s's answer does not verify: %v", log.Name(), err)
		return out
	}
	out.LeafIndex, out.TreeSize, out.CheckpointTime = e.LeafIndex, res.TreeSize, res.CheckpointTime
	switch res.Status {
	case ctinclusion.Included:
		out.Status = "included"
		out.Detail = fmt.Sprintf("in log %s's checkpoint of %d entries, at index %d", log.Name(), res.TreeSize, e.LeafIndex)
	case ctinclusion.NotYet:
		// In the order the ct verifier (internal/pkies/ct) decides: a
		// checkpoint signed after the deadline without the entry is a
		// broken promise, whatever the clock here says.
		switch {
		case log.Kind == loglist.Static && res.CheckpointTime.After(deadline):
			out.Status = "fail"
			out.Detail = fmt.Sprintf("log %s signed a checkpoint of %d entries at %s, after its maximum merge delay, without the SCT's entry at index %d",
				log.Name(), res.TreeSize, res.CheckpointTime.UTC().Format(time.RFC3339), e.LeafIndex)
		case !now.After(deadline):
			out.Status = "promise"
			out.Detail = fmt.Sprintf("promise: not in log %s's checkpoint of %d entries; the log has until %s (its maximum merge delay of %s)",
				log.Name(), res.TreeSize, deadline.UTC().Format(time.RFC3339), log.MMD)
		default:
			out.Status = "unknown"
			out.Detail = fmt.Sprintf("not in log %s's latest checkpoint (%d entries, signed %s), past its maximum merge delay", log.Name(), res.TreeSize,
				res.CheckpointTime.UTC().Format(time.RFC3339))
		}
	default:
		out.Status = "unknown"
		out.Detail = fmt.Sprintf("log %s: %s: %s", log.Name(), res.Status, e.Message)
	}
	return out
}

func runCTCheck(ctx context.Context, env *Env, args []string) error {
	fs := command.NewFlags(env, "ct check", ctCheckUsage)
	listSrc := fs.String("log-list", "", "the CT log list (Chrome's v3 JSON, or Apple's): a file or an http(s) URL")
	listSig := fs.String("log-list-sig", "", "the list's detached signature (file or URL); checked with --log-list-key")
	listKey := fs.String("log-list-key", "", "the PEM public key that signs the list")
	policy := fs.String("policy", "chrome", "chrome | apple | one")
	ocspPath := fs.String("ocsp", "", "a stapled OCSP response (DER) carrying SCTs")
	sctList := fs.String("sct-list", "", "a TLS SignedCertificateTimestampList (binary), as the TLS extension carries it")
	inclusion := fs.Bool("inclusion", false, "ask each SCT's log for the entry's inclusion proof (tells the log what you check)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return command.UsageError("want CERT.pem [ISSUER.pem]")
	}
	if *listSrc == "" {
		return command.UsageError("--log-list is required")
	}
	if (*listSig == "") != (*listKey == "") {
		return command.UsageError("--log-list-sig and --log-list-key go together")
	}
	pol, err := sctpolicy.ByName(*policy)
	if err != nil {
		return command.UsageError("--policy: %v", err)
	}
	certs, err := readCerts(pos[0])
	if err != nil {
		return command.UsageError("%v", err)
	}
	in := ctCheckInput{Leaf: certs[0], Policy: pol, Now: time.Now()}
	if len(certs) > 1 {
		in.Issuer = certs[1]
	}
	if len(pos) == 2 {
		is, err := readCerts(pos[1])
		if err != nil {
			return command.UsageError("%v", err)
		}
		in.Issuer = is[0]
	}
	if *ocspPath != "" {
		if in.OCSP, err = command.ReadLimited(*ocspPath, 64<<10); err != nil {
			return command.UsageError("--ocsp: %v", err)
		}
	}
	if *sctList != "" {
		b, err := command.ReadLimited(*sctList, 64<<10)
		if err != nil {
			return command.UsageError("--sct-list: %v", err)
		}
		scts, err := sct.ParseList(b, sct.TLSExtension)
		if err != nil {
			return command.UsageError("--sct-list %s: %v", *sctList, err)
		}
		for _, s := range scts {
			in.TLS = append(in.TLS, s.Raw)
		}
	}
	if in.Issuer == nil {
		if embedded, _ := sct.FromCertificate(in.Leaf); len(embedded) > 0 {
			return command.UsageError("%s has embedded SCTs, which sign the precertificate and its issuer's key: give ISSUER.pem, or put the issuer after the leaf in %s", pos[0], pos[0])
		}
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	o := loglist.LoadOptions{Signature: *listSig}
	if *listKey != "" {
		b, err := command.ReadLimited(*listKey, 64<<10)
		if err != nil {
			return command.UsageError("--log-list-key: %v", err)
		}
		if o.PublicKey, err = loglist.ParsePublicKeyPEM(b); err != nil {
			return command.UsageError("--log-list-key %s: %v", *listKey, err)
		}
	}
	if in.List, err = loglist.Load(ctx, hc, *listSrc, o); err != nil {
		return command.UsageError("--log-list: %v", err)
	}
	if *inclusion {
		fmt.Fprintln(env.Stderr, "asking each SCT's log for its entry: each log learns which certificate is being checked")
		in.Inclusion = &ctinclusion.Fetcher{HTTP: hc, Timeout: 10 * time.Second}
	}
	r := checkSCTs(ctx, in)
	if *asJSON {
		if err := command.WriteJSON(env.Stdout, r); err != nil {
			return err
		}
	} else {
		printCTCheck(env.Stdout, r)
	}
	if !r.Compliant || r.Contradicted {
		return command.Negative()
	}
	return nil
}

// printCTCheck prints a report for a reader.
func printCTCheck(w io.Writer, r *ctCheckReport) {
	fmt.Fprintf(w, "%s (SHA-256 %s…)\n", r.Certificate, r.SHA256[:16])
	for _, e := range r.SourceErrors {
		fmt.Fprintf(w, "  unreadable SCTs: %s\n", e)
	}
	if len(r.SCTs) == 0 {
		fmt.Fprintln(w, "  no SCT (embedded, TLS or OCSP)")
	}
	for i, s := range r.SCTs {
		log := "log " + s.LogID[:16] + "…"
		verdict := "valid"
		switch {
		case !s.Listed:
			verdict = "not checked: its log is not in the log list"
		case !s.Valid:
			verdict = "INVALID: " + s.Error
		}
		if s.Listed {
			log = fmt.Sprintf("%s [%s, %s] %s…", s.Log, s.Operator, s.LogState, s.LogID[:16])
		}
		counted := ""
		if s.Counted {
			counted = ", counted"
		}
		fmt.Fprintf(w, "  SCT %d (%s) from %s at %s: %s%s\n", i+1, s.Source, log, s.Time.UTC().Format(time.RFC3339), verdict, counted)
		if s.Inclusion != nil {
			fmt.Fprintf(w, "        inclusion: %s: %s\n", s.Inclusion.Status, s.Inclusion.Detail)
		}
	}
	verdict := "compliant"
	if !r.Compliant {
		verdict = "NOT compliant"
	}
	fmt.Fprintf(w, "%s: %s\n", verdict, r.Reason) // the reason names the policy
	if r.Contradicted {
		fmt.Fprintln(w, "a log's signed tree contradicts an SCT (see inclusion above)")
	}
}

// readCerts reads the certificates of a PEM file (in order), or one DER
// certificate.
func readCerts(path string) ([]*x509.Certificate, error) {
	b, err := command.ReadLimited(path, 1<<20)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(b), "-----BEGIN") {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return nil, fmt.Errorf("%s: neither PEM nor a DER certificate: %w", path, err)
		}
		return []*x509.Certificate{c}, nil
	}
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", path, len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no CERTIFICATE in it", path)
	}
	return out, nil
}
