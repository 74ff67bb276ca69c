package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/roots"
	"github.com/pkie/pkie/internal/scan"
	"github.com/pkie/pkie/internal/termtext"
	"github.com/pkie/pkie/internal/verify"
)

// maxCertFile bounds a certificate file read by pkie verify: a PEM bundle
// of MaxChain certificates of MaxCertBytes each fits with room to spare.
const maxCertFile = 16 << 20

// maxRepeat bounds --repeat, and so the timings held for the statistics.
const maxRepeat = 1_000_000

// defaultConnectTimeout bounds --connect's DNS, TCP connect and handshake.
const defaultConnectTimeout = 10 * time.Second

const verifyUsage = `[flags] CERTFILE... | --scan FILE --domain NAME | --connect HOST[:PORT]
       pkie verify --corpus SPEC[,SPEC...] [flags]   (differential testing; --corpus -h for its flags)

Verifies one certificate chain with every back end (Go's crypto/x509 serial
and parallel, OpenSSL's libcrypto, rustls-webpki) and shows each verdict and
the time each spent per phase (docs/measurement/verification.md).

The chain comes from exactly one of:
  CERTFILE...        PEM files (any number of CERTIFICATE blocks) or DER files
                     (one certificate each), in order, leaf first; - is stdin
  --scan FILE        a pkie scan file, with --domain naming the record
  --connect HOST     a TLS server, dialled and handshaken with its chain taken
                     as presented (nothing is verified while connecting)

Exit status: 0 every back end that ran says valid; 1 one says invalid;
2 bad usage, an operational error, or no back end gave a verdict.`

// verifyInput is where the chain came from, for the report.
type verifyInput struct {
	Kind         string   `json:"kind"` // files, scan, connect
	Files        []string `json:"files,omitempty"`
	ScanFile     string   `json:"scan_file,omitempty"`
	Domain       string   `json:"domain,omitempty"`
	Records      int      `json:"records,omitempty"` // the scan file's records for Domain with a chain; the first is used
	RecordTime   string   `json:"record_time,omitempty"`
	Connect      string   `json:"connect,omitempty"`
	Certificates int      `json:"certificates"`
	Leaf         string   `json:"leaf"` // the leaf's subject, or why it does not parse
}

// verifyConn is what --connect measured.
type verifyConn struct {
	Addr       string        `json:"addr"`
	ServerName string        `json:"server_name"`
	TLSVersion string        `json:"tls_version"`
	DNS        time.Duration `json:"dns_ns"`
	Connect    time.Duration `json:"connect_ns"` // from the first address tried
	Attempts   int           `json:"attempts"`   // addresses tried, the last one connected
	Handshake  time.Duration `json:"handshake_ns"`
	Total      time.Duration `json:"total_ns"`
}

// verifyOutcome is one back end's part of the report.
type verifyOutcome struct {
	Name    string               `json:"name"`
	Library string               `json:"library"`
	Result  *verify.Result       `json:"result,omitempty"`
	Error   string               `json:"error,omitempty"`
	Stats   *verify.PhaseSummary `json:"stats,omitempty"`
}

// verifyRootsInfo says which trust anchors were used.
type verifyRootsInfo struct {
	Source       string `json:"source"` // mozilla, system or the file
	Description  string `json:"description"`
	Certificates int    `json:"certificates"`
}

// verifyReport is pkie verify's result, printed as text or JSON.
type verifyReport struct {
	Input      verifyInput      `json:"input"`
	Roots      verifyRootsInfo  `json:"roots"`
	Host       string           `json:"host"` // empty: no hostname check
	Time       time.Time        `json:"time"`
	TimeSource string           `json:"time_source"` // now, flag or record
	Purpose    verify.Purpose   `json:"purpose"`
	Connection *verifyConn      `json:"connection,omitempty"`
	Repeat     int              `json:"repeat"`
	Backends   []verifyOutcome  `json:"backends"`
	Missing    []verify.Missing `json:"missing"`
	Agree      bool             `json:"agree"`
	Summary    string           `json:"summary"`
}

func Verify(ctx context.Context, env *command.Env, args []string) error {
	// A corpus run has flags of its own (verify_corpus.go).
	if hasArg(args, "--corpus") {
		return runVerifyCorpus(ctx, env, args)
	}
	fs := command.NewFlags(env, "verify", verifyUsage)
	scanFile := fs.String("scan", "", "take the chain from this pkie scan `FILE` (with --domain)")
	domain := fs.String("domain", "", "the site whose record --scan takes (the first with a chain)")
	connect := fs.String("connect", "", "take the chain from the TLS server at `HOST[:PORT]` (port 443 by default)")
	connectTimeout := fs.Duration("connect-timeout", defaultConnectTimeout, "bound on --connect's DNS lookup, TCP connect and TLS handshake together")
	rootsFlag := fs.String("roots", "mozilla", "trust anchors: mozilla (Mozilla's NSS roots as embedded by golang.org/x/crypto/x509roots/fallback), system (the operating system's PEM bundle), or a PEM `FILE`")
	host := fs.String("host", "", "the name (or IP) the leaf must be valid for; default: the --connect host or the --scan domain; none for files (no hostname check); \"\" skips the check")
	atFlag := fs.String("time", "now", "verification time: RFC 3339, now, or record (the --scan record's time)")
	purpose := fs.String("purpose", "server", "what the leaf must be fit for: server or client (TLS authentication)")
	backendsFlag := fs.String("backends", strings.Join(verify.Names, ","), "comma-separated back ends to run")
	verifierDir := fs.String("verifier-dir", "", "look for the helper programs here first (a list separated by "+string(filepath.ListSeparator)+"), then in $PKIE_VERIFIER_DIR, pkie's directory and $PATH")
	helperTimeout := fs.Duration("helper-timeout", verify.DefaultHelperTimeout, "bound on one exchange with a helper; one that takes longer is killed")
	repeat := fs.Int("repeat", 1, "time each back end over `N` verifications after one untimed warm-up; N > 1 shows mean, p50 and p99")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	sources := 0
	for _, on := range []bool{len(pos) > 0, *scanFile != "", *connect != ""} {
		if on {
			sources++
		}
	}
	if sources != 1 {
		return command.UsageError("give the chain in exactly one way: certificate files, --scan FILE --domain NAME, or --connect HOST[:PORT] (run \"pkie verify -h\")")
	}
	if (*scanFile != "") != (*domain != "") {
		return command.UsageError("--scan and --domain go together")
	}
	if *repeat < 1 || *repeat > maxRepeat {
		return command.UsageError("--repeat must be from 1 to %d, got %d", maxRepeat, *repeat)
	}
	p := verify.Purpose(*purpose)
	if p != verify.Server && p != verify.Client {
		return command.UsageError("--purpose %q: want server or client", *purpose)
	}
	if set["connect-timeout"] && *connectTimeout == 0 {
		return command.UsageError("--connect-timeout must be positive")
	}
	if set["helper-timeout"] && *helperTimeout == 0 {
		return command.UsageError("--helper-timeout must be positive")
	}
	names, err := parseBackendNames(*backendsFlag)
	if err != nil {
		return err
	}
	rep := &verifyReport{Purpose: p, Repeat: *repeat, Missing: []verify.Missing{}}

	var at time.Time
	switch *atFlag {
	case "now":
		at, rep.TimeSource = time.Now(), "now"
	case "record":
		if *scanFile == "" {
			return command.UsageError("--time record needs --scan")
		}
		rep.TimeSource = "record"
	default:
		at, err = time.Parse(time.RFC3339, *atFlag)
		if err != nil {
			return command.UsageError("--time %q: want RFC 3339 (2026-11-23T15:04:05Z), now or record", *atFlag)
		}
		rep.TimeSource = "flag"
	}

	anchors, err := loadVerifyRoots(*rootsFlag, env.Getenv, &rep.Roots)
	if err != nil {
		return err
	}

	var chain [][]byte
	switch {
	case len(pos) > 0:
		chain, err = readChainFiles(env, pos)
		if err != nil {
			return err
		}
		rep.Input = verifyInput{Kind: "files", Files: pos}
	case *scanFile != "":
		rec, n, err := scanRecordFor(env, *scanFile, *domain)
		if err != nil {
			return err
		}
		chain = rec.Chain
		rep.Input = verifyInput{Kind: "scan", ScanFile: *scanFile, Domain: rec.Domain, Records: n, RecordTime: rec.Time.UTC().Format(time.RFC3339)}
		if !set["host"] {
			*host = rec.Domain
		}
		if rep.TimeSource == "record" {
			if rec.Time.IsZero() {
				return command.UsageError("--time record: the record for %s has no time", rec.Domain)
			}
			at = rec.Time
		}
	default:
		if strings.Contains(*connect, "://") {
			return command.UsageError("--connect %q is a URL: give HOST[:PORT]", *connect)
		}
		h, port, err := command.SplitHostPort(*connect, 443)
		if err != nil {
			return command.UsageError("--connect: %v", err)
		}
		sni := h
		if set["host"] && *host != "" {
			sni = *host
		}
		if _, err := netip.ParseAddr(sni); err == nil {
			sni = ""
		}
		if !set["host"] {
			*host = h
		}
		conn, certs, err := dialForChain(ctx, h, port, sni, *connectTimeout)
		if err != nil {
			return fmt.Errorf("--connect %s: %w", net.JoinHostPort(h, strconv.Itoa(port)), err)
		}
		chain = certs
		rep.Connection = conn
		rep.Input = verifyInput{Kind: "connect", Connect: net.JoinHostPort(h, strconv.Itoa(port))}
	}
	rep.Input.Certificates = len(chain)
	rep.Input.Leaf = leafSubject(chain)
	rep.Host, rep.Time = *host, at.UTC()

	req := &verify.Request{Roots: anchors, Chain: chain, Host: rep.Host, Time: at, Purpose: p}
	if err := req.Check(); err != nil {
		return command.UsageError("%v", err)
	}

	dirs := verify.DefaultDirs(env.Getenv)
	if *verifierDir != "" {
		dirs = append(filepath.SplitList(*verifierDir), dirs...)
	}
	bs, missing, err := verify.Open(ctx, verify.Options{Names: names, Dirs: dirs, Timeout: *helperTimeout})
	if err != nil {
		return command.UsageError("%v", err)
	}
	defer verify.CloseAll(bs)
	for _, m := range missing {
		fmt.Fprintf(env.Stderr, "pkie verify: %s: %s\n", m.Name, termtext.Escape(m.Why))
		if m.Found {
			// Built but broken: a failed back end, which counts,
			// not one that is merely absent.
			rep.Backends = append(rep.Backends, verifyOutcome{Name: m.Name, Error: m.Why})
			continue
		}
		rep.Missing = append(rep.Missing, m)
	}
	if len(bs) == 0 {
		return command.UsageError("no back end could run")
	}

	for _, b := range bs {
		rep.Backends = append(rep.Backends, runBackend(ctx, b, req, *repeat, env.Stderr))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	code := rep.conclude()

	if *asJSON {
		if err := command.WriteJSON(env.Stdout, rep); err != nil {
			return err
		}
	} else {
		printVerify(env.Stdout, rep)
	}
	switch code {
	case command.ExitOK:
		return nil
	case command.ExitNegative:
		return command.Negative()
	}
	return &command.ExitError{Code: command.ExitUsage, Msg: "no verdict from " + strings.Join(rep.failed(), ", ")}
}

// parseBackendNames splits --backends, refusing unknown and repeated names
// before anything starts.
func parseBackendNames(s string) ([]string, error) {
	names := []string{}
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	o := verify.Options{Names: names}
	return names, command.OptionError(o.Validate(), map[string]string{"Names": "--backends"})
}

// loadVerifyRoots reads the trust anchors --roots names, as DER, and says
// in info where they came from.
func loadVerifyRoots(which string, getenv func(string) string, info *verifyRootsInfo) ([][]byte, error) {
	var st *roots.Store
	var err error
	switch which {
	case "mozilla":
		st, err = roots.Mozilla()
		info.Description = "Mozilla's NSS roots as embedded by golang.org/x/crypto/x509roots/fallback (their distrust-after dates are not passed to the back ends)"
	case "system":
		st, err = roots.System(getenv)
		info.Description = "the operating system's root bundle"
	default:
		st, err = roots.LoadPEM(which)
		info.Description = "PEM file " + which
	}
	if err != nil {
		return nil, command.UsageError("--roots: %v", err)
	}
	info.Source = which
	info.Certificates = len(st.Certs)
	der := make([][]byte, len(st.Certs))
	for i, c := range st.Certs {
		der[i] = c.Raw
	}
	return der, nil
}

// readChainFiles reads the certificates of files in order: every
// CERTIFICATE block of a PEM file, or a DER file's one certificate. A
// certificate is passed on as read, parsed or not: a malformed one is the
// back ends' to judge.
func readChainFiles(env *command.Env, files []string) ([][]byte, error) {
	var chain [][]byte
	for _, name := range files {
		var r io.Reader
		if name == "-" {
			r = env.Stdin
		} else {
			f, err := os.Open(name)
			if err != nil {
				hint := ""
				if (errors.Is(err, os.ErrNotExist) && !strings.ContainsAny(name, `/\`)) || strings.Contains(name, "://") {
					hint = " (for a server's chain: --connect HOST[:PORT])"
				}
				return nil, command.UsageError("%v%s", err, hint)
			}
			defer f.Close()
			r = f
		}
		b, err := io.ReadAll(io.LimitReader(r, maxCertFile+1))
		if err != nil {
			return nil, command.UsageError("%s: %v", name, err)
		}
		if len(b) > maxCertFile {
			return nil, command.UsageError("%s: larger than %d bytes: not a certificate file", name, maxCertFile)
		}
		if len(b) == 0 {
			return nil, command.UsageError("%s: empty", name)
		}
		if !bytes.Contains(b, []byte("-----BEGIN")) {
			// DER: a SEQUENCE, sent on as it is (a back end says
			// whether it parses); anything else is not a certificate.
			if b[0] != 0x30 {
				return nil, command.UsageError("%s: neither PEM nor DER (a DER certificate starts with 0x30)", name)
			}
			chain = append(chain, b)
			continue
		}
		n := 0
		for rest := b; ; {
			var blk *pem.Block
			blk, rest = pem.Decode(rest)
			if blk == nil {
				break
			}
			if blk.Type == "CERTIFICATE" {
				chain = append(chain, blk.Bytes)
				n++
			}
		}
		if n == 0 {
			return nil, command.UsageError("%s: PEM without a CERTIFICATE block", name)
		}
	}
	return chain, nil
}

// scanRecordFor returns the first record of a scan file for domain that
// holds a chain, and how many such records the file has.
func scanRecordFor(env *command.Env, path, domain string) (scan.Record, int, error) {
	var r io.Reader
	if path == "-" {
		r = env.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return scan.Record{}, 0, command.UsageError("--scan: %v", err)
		}
		defer f.Close()
		r = f
	}
	var first scan.Record
	var lastErr string
	n, seen := 0, 0
	st, err := scan.ReadRecords(r, func(rec scan.Record) error {
		if !strings.EqualFold(strings.TrimSuffix(rec.Domain, "."), strings.TrimSuffix(domain, ".")) {
			return nil
		}
		seen++
		if !rec.OK() {
			lastErr = rec.Error
			return nil
		}
		if n == 0 {
			first = rec
		}
		n++
		return nil
	})
	if err != nil {
		return scan.Record{}, 0, fmt.Errorf("--scan %s: %w", path, err)
	}
	switch {
	case n > 0:
		return first, n, nil
	case seen > 0:
		return scan.Record{}, 0, command.UsageError("--scan %s: %s was scanned without a chain: %s", path, domain, lastErr)
	case st.Records == 0:
		return scan.Record{}, 0, command.UsageError("--scan %s: no scan record in it (%d lines malformed): not a pkie scan file", path, st.Malformed)
	}
	return scan.Record{}, 0, command.UsageError("--scan %s: no record for %s among %d", path, domain, st.Records)
}

// dialForChain connects to host:port and takes the chain the server
// presents, verifying nothing: that is the back ends' job. It times the
// DNS lookup, the TCP connect and the TLS handshake apart, as the Servo
// experiment set the verification beside the whole connection's time.
func dialForChain(ctx context.Context, host string, port int, sni string, timeout time.Duration) (*verifyConn, [][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &verifyConn{ServerName: sni}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		t := time.Now()
		addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		c.DNS = time.Since(t)
		if err != nil {
			return nil, nil, err
		}
	}
	var raw net.Conn
	var errs []error
	var d net.Dialer
	// Connect runs from the first attempt: addresses that failed first
	// are part of what connecting cost.
	first := time.Now()
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		c.Attempts++
		conn, err := d.DialContext(ctx, "tcp", ap.String())
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		c.Connect, c.Addr, raw = time.Since(first), ap.String(), conn
		break
	}
	if raw == nil {
		return nil, nil, errors.Join(errs...)
	}
	defer raw.Close()
	var chain [][]byte
	tc := tls.Client(raw, &tls.Config{
		ServerName: sni,
		// The chain is verified afterwards, by every back end, against
		// --roots; crypto/tls must not decide first.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			for _, pc := range cs.PeerCertificates {
				chain = append(chain, pc.Raw)
			}
			return nil
		},
	})
	t := time.Now()
	err := tc.HandshakeContext(ctx)
	c.Handshake = time.Since(t)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS handshake: %w", err)
	}
	c.TLSVersion = tls.VersionName(tc.ConnectionState().Version)
	c.Total = c.DNS + c.Connect + c.Handshake
	if len(chain) == 0 {
		return nil, nil, errors.New("the server presented no certificate")
	}
	return c, chain, nil
}

// leafSubject names the leaf for people.
func leafSubject(chain [][]byte) string {
	if len(chain) == 0 {
		return ""
	}
	c, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return "(does not parse: " + err.Error() + ")"
	}
	return c.Subject.String()
}

// runBackend verifies req with b once untimed (the verdict) and then
// repeat times for the timings. A verdict that changes between runs is an
// error of the back end: its answer cannot be trusted.
func runBackend(ctx context.Context, b verify.Backend, req *verify.Request, repeat int, progress io.Writer) verifyOutcome {
	out := verifyOutcome{Name: b.Name(), Library: b.Library()}
	first, err := b.Verify(ctx, req)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	// Of each timed run only the timings are kept, 48 bytes a run.
	var res verify.Result
	var runs verify.Samples
	last := time.Now()
	for i := 0; i < repeat; i++ {
		r, err := b.Verify(ctx, req)
		if err != nil {
			out.Error = fmt.Sprintf("run %d of %d: %v", i+1, repeat, err)
			return out
		}
		if r.Valid != first.Valid || r.Code != first.Code {
			out.Error = fmt.Sprintf("run %d of %d says %s where the first said %s", i+1, repeat, r.Code, first.Code)
			return out
		}
		if i == 0 {
			res = r
		}
		if repeat > 1 {
			runs.Add(r)
		}
		if progress != nil && time.Since(last) >= time.Second {
			fmt.Fprintf(progress, "pkie verify: %s: %d of %d runs\n", b.Name(), i+1, repeat)
			last = time.Now()
		}
	}
	// The result shown is the first timed run's, its phases one
	// measurement; the statistics cover every timed run.
	out.Result = &res
	if repeat > 1 {
		st := runs.Summary(b.Name() == "go-parallel")
		out.Stats = &st
	}
	return out
}

// conclude decides the exit code and writes the summary: any back end
// saying invalid is a negative answer; otherwise a back end without a
// verdict (a helper that failed) makes the run inconclusive.
func (rep *verifyReport) conclude() int {
	byCode := map[verify.Code][]string{}
	var codes []verify.Code
	valid, invalid := 0, 0
	for _, o := range rep.Backends {
		if o.Result == nil {
			continue
		}
		c := o.Result.Code
		if _, ok := byCode[c]; !ok {
			codes = append(codes, c)
		}
		byCode[c] = append(byCode[c], o.Name)
		if o.Result.Valid {
			valid++
		} else {
			invalid++
		}
	}
	failed := rep.failed()
	var s strings.Builder
	switch {
	case valid+invalid == 0:
		fmt.Fprintf(&s, "no verdict from %s", strings.Join(failed, ", "))
		failed = nil
	case len(codes) == 1:
		rep.Agree = true
		fmt.Fprintf(&s, "agree: %s %s", countBackends(valid+invalid), codes[0])
	default:
		rep.Agree = valid == 0 || invalid == 0
		if rep.Agree {
			s.WriteString("agree on invalid, with different codes: ")
		} else {
			s.WriteString("disagree: ")
		}
		for i, c := range codes {
			if i > 0 {
				s.WriteString("; ")
			}
			fmt.Fprintf(&s, "%s %s %s", strings.Join(byCode[c], ", "), say(len(byCode[c])), c)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(&s, " (no verdict from %s)", strings.Join(failed, ", "))
	}
	rep.Summary = s.String()
	switch {
	case invalid > 0:
		return command.ExitNegative
	case len(failed) > 0 || valid == 0:
		return command.ExitUsage
	}
	return command.ExitOK
}

func countBackends(n int) string {
	if n == 1 {
		return "the only back end says"
	}
	return fmt.Sprintf("all %d back ends say", n)
}

func say(n int) string {
	if n == 1 {
		return "says"
	}
	return "say"
}

// failed names the back ends that gave no verdict.
func (rep *verifyReport) failed() []string {
	var f []string
	for _, o := range rep.Backends {
		if o.Result == nil {
			f = append(f, o.Name)
		}
	}
	return f
}

// usec renders d in microseconds with three significant decimals at most:
// 1234.5, 123.4, 12.34, 1.234.
func usec(d time.Duration) string {
	u := float64(d) / float64(time.Microsecond)
	switch {
	case u >= 100:
		return strconv.FormatFloat(u, 'f', 1, 64)
	case u >= 10:
		return strconv.FormatFloat(u, 'f', 2, 64)
	}
	return strconv.FormatFloat(u, 'f', 3, 64)
}

func printVerify(w io.Writer, rep *verifyReport) {
	in := rep.Input
	switch in.Kind {
	case "files":
		fmt.Fprintf(w, "input      %s: %d certificate%s\n", termtext.Escape(strings.Join(in.Files, ", ")), in.Certificates, command.Plural(in.Certificates))
	case "scan":
		which := ""
		if in.Records > 1 {
			which = fmt.Sprintf(" (the first of %d records with a chain)", in.Records)
		}
		fmt.Fprintf(w, "input      scan %s, %s%s, scanned %s: %d certificate%s\n", termtext.Escape(in.ScanFile), termtext.Escape(in.Domain), which, in.RecordTime, in.Certificates, command.Plural(in.Certificates))
	case "connect":
		fmt.Fprintf(w, "input      TLS server %s: %d certificate%s\n", termtext.Escape(in.Connect), in.Certificates, command.Plural(in.Certificates))
	}
	fmt.Fprintf(w, "leaf       %s\n", termtext.Escape(in.Leaf))
	fmt.Fprintf(w, "roots      %d from %s\n", rep.Roots.Certificates, termtext.Escape(rep.Roots.Description))
	if rep.Host == "" {
		fmt.Fprintf(w, "host       none: the hostname is not checked (--host NAME checks it)\n")
	} else {
		fmt.Fprintf(w, "host       %s\n", termtext.Escape(rep.Host))
	}
	fmt.Fprintf(w, "time       %s (%s)\n", rep.Time.Format(time.RFC3339), rep.TimeSource)
	fmt.Fprintf(w, "purpose    %s\n", rep.Purpose)
	if c := rep.Connection; c != nil {
		sni := c.ServerName
		if sni == "" {
			sni = "none"
		}
		fmt.Fprintf(w, "connection %s, %s, SNI %s: dns %s µs, tcp connect %s µs, tls handshake %s µs, total %s µs\n",
			c.Addr, c.TLSVersion, termtext.Escape(sni), usec(c.DNS), usec(c.Connect), usec(c.Handshake), usec(c.Total))
		if c.Attempts > 1 {
			fmt.Fprintf(w, "           tcp connect covers %d addresses tried in turn\n", c.Attempts)
		}
	}
	if rep.Repeat > 1 {
		fmt.Fprintf(w, "timing     %d runs per back end after one warm-up\n", rep.Repeat)
	} else {
		fmt.Fprintf(w, "timing     one run per back end after one warm-up\n")
	}
	for _, o := range rep.Backends {
		fmt.Fprintf(w, "\n%s (%s)\n", o.Name, termtext.Escape(o.Library))
		if o.Result == nil {
			fmt.Fprintf(w, "  error      %s\n", termtext.Escape(o.Error))
			continue
		}
		r := o.Result
		verdict := "invalid"
		if r.Valid {
			verdict = "valid"
		}
		fmt.Fprintf(w, "  verdict    %s\n", verdict)
		fmt.Fprintf(w, "  code       %s\n", r.Code)
		if r.Reason != "" {
			fmt.Fprintf(w, "  reason     %s\n", termtext.Escape(r.Reason))
		}
		if r.Valid {
			fmt.Fprintf(w, "  depth      %d (certificates on the path, root included)\n", r.Depth)
		}
		if r.RootsSkipped > 0 {
			fmt.Fprintf(w, "  skipped    %d roots it could not parse\n", r.RootsSkipped)
		}
		printPhases(w, o, rep.Host != "")
	}
	fmt.Fprintf(w, "\n%s\n", rep.Summary)
}

// printPhases prints a back end's phase table: one column for one run,
// mean, p50 and p99 for several.
func printPhases(w io.Writer, o verifyOutcome, hostChecked bool) {
	type row struct {
		name string
		one  time.Duration
		st   verify.Summary
	}
	r, st := o.Result, o.Stats
	if st == nil {
		st = &verify.PhaseSummary{}
	}
	var par verify.Summary
	if st.Parallel != nil {
		par = *st.Parallel
	}
	rows := []row{{"roots", r.Phases.Roots, st.Roots}, {"chain", r.Phases.Chain, st.Chain}}
	if o.Name == "go-parallel" {
		rows = append(rows, row{"parallel", r.Phases.Parallel, par})
	}
	rows = append(rows, row{"verify", r.Phases.Verify, st.Verify})
	hostRow := len(rows)
	rows = append(rows, row{"hostname", r.Phases.Hostname, st.Hostname},
		row{"total", r.Phases.Total(), st.Total}, row{"round trip", r.RoundTrip, st.RoundTrip})
	if o.Stats == nil {
		fmt.Fprintf(w, "  %-10s %10s\n", "phase", "µs")
	} else {
		fmt.Fprintf(w, "  %-10s %10s %10s %10s   (µs, %d runs)\n", "phase", "mean", "p50", "p99", st.Total.N)
	}
	for i, x := range rows {
		note := ""
		if i == hostRow && !hostChecked {
			note = "   not checked"
		} else if i == hostRow && !r.Valid && r.Code != verify.NameMismatch {
			note = "   not reached: the path failed"
		}
		if x.name == "round trip" {
			note = "   pkie's wall time for the call"
		}
		if o.Stats == nil {
			fmt.Fprintf(w, "  %-10s %10s%s\n", x.name, usec(x.one), note)
		} else {
			fmt.Fprintf(w, "  %-10s %10s %10s %10s%s\n", x.name, usec(x.st.Mean), usec(x.st.P50), usec(x.st.P99), note)
		}
	}
}
