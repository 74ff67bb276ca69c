package cli

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/sctpolicy"
)

const ctCheckUsage = "CERT.pem [ISSUER.pem] --log-list FILE|URL [--log-list-sig F --log-list-key F] [--policy chrome|apple|one]\n" +
	"                    [--ocsp RESP.der] [--sct-list F] [--inclusion [--witness KEY]... [--witness-quorum N]] [--json]\n\n" +
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

func runCTCheck(ctx context.Context, env *Env, args []string) error {
	fs := command.NewFlags(env, "ct check", ctCheckUsage)
	listSrc := fs.String("log-list", "", "the CT log list (Chrome's v3 JSON, or Apple's): a file or an http(s) URL")
	listSig := fs.String("log-list-sig", "", "the list's detached signature (file or URL); checked with --log-list-key")
	listKey := fs.String("log-list-key", "", "the PEM public key that signs the list")
	policy := fs.String("policy", "chrome", "chrome | apple | one")
	ocspPath := fs.String("ocsp", "", "a stapled OCSP response (DER) carrying SCTs")
	sctList := fs.String("sct-list", "", "a TLS SignedCertificateTimestampList (binary), as the TLS extension carries it")
	inclusion := fs.Bool("inclusion", false, "ask each SCT's log for the entry's inclusion proof (tells the log what you check)")
	var witnesses command.StringList
	fs.Var(&witnesses, "witness", "with --inclusion: a witness's note verifier key (or @FILE; repeatable) that must have cosigned each static-ct-api checkpoint, to --witness-quorum")
	quorum := fs.Int("witness-quorum", 0, "how many of the --witness witnesses must have cosigned (default all)")
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
	in := ct.CheckInput{Leaf: certs[0], Policy: pol, Now: time.Now()}
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
		if in.TLS, err = command.ReadSCTList(*sctList); err != nil {
			return err
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
	if (len(witnesses) > 0 || *quorum != 0) && !*inclusion {
		return command.UsageError("--witness and --witness-quorum need --inclusion")
	}
	if len(witnesses) > 0 || *quorum != 0 {
		keys := make([]string, len(witnesses))
		for i, w := range witnesses {
			if keys[i], err = command.ReadKeyArg(w); err != nil {
				return command.UsageError("--witness: %v", err)
			}
		}
		if in.Witnesses, err = ctinclusion.NewWitnesses(keys, *quorum); err != nil {
			return command.UsageError("--witness: %v", err)
		}
	}
	if *inclusion {
		fmt.Fprintln(env.Stderr, "asking each SCT's log for its entry: each log learns which certificate is being checked")
		in.Inclusion = &ctinclusion.Fetcher{HTTP: hc, Timeout: 10 * time.Second}
	}
	r := ct.CheckSCTs(ctx, in)
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
func printCTCheck(w io.Writer, r *ct.Report) {
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
