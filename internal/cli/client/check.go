package client

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/termtext"
	"github.com/pkie/pkie/pec"
	"github.com/pkie/pkie/probe"

	// When the system has no root store (minimal containers), CA
	// validation falls back to the Mozilla roots compiled in.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func Check(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "check", "[flags] HOST[:PORT]\n\n"+
		"Probes HOST along this machine's path, asks the notaries whether they see the same\n"+
		"certificate, validates the chain against the CA roots and decides; the verdict's\n"+
		"headline names the evidence that decided it. With --cloud BUNDLE a PEC cloud proves\n"+
		"the chain (ct, revocation, its notary). Exit status: 0 trusted, 1 untrusted or\n"+
		"inconclusive (unless --fail-open), 2 usage or operational error.")
	notaries := fs.String("notaries", "", "directory of Convergence .notary bundles, or one bundle file (default $XDG_CONFIG_HOME/pkie/notaries)")
	agility := fs.Bool("trust-agility", false, "Convergence-style trust without CAs: trust what the notaries agree on even if CA validation fails (default: CA validation is required too)")
	policy := fs.String("policy", "majority", "majority | consensus | minority | quorum:Q (fraction of configured notaries, e.g. quorum:0.75)")
	minDur := fs.Duration("min-duration", 0, "a notary's yes counts only if it has seen the certificate for at least this long (Perspectives)")
	unreachFail := fs.Bool("unreachable-is-failure", false, "count notaries that cannot be reached or cannot reach the site as no votes")
	failOpen := fs.Bool("fail-open", false, "exit 0 on an inconclusive verdict (default: inconclusive is not trusted)")
	roots := fs.String("roots", "", "PEM file of CA roots for CA path validation (default: the system's roots)")
	require := fs.String("require", "", "comma-separated sources that must pass besides the notaries and CA validation (available: ct, revocation, and notary with --cloud; ca is required unless --trust-agility)")
	cachePath := fs.String("cache", "", "local cache file (default $XDG_CACHE_HOME/pkie/verdicts.cache)")
	cacheMaxAge := fs.Duration("cache-max-age", check.DefaultCacheMaxAge, "a cached acceptance older than this goes back to the notaries")
	noCache := fs.Bool("no-cache", false, "neither read nor write the local cache")
	timeout := fs.Duration("timeout", check.DefaultNotaryTimeout, "one deadline for all notary queries together")
	probeTimeout := fs.Duration("probe-timeout", probe.DefaultTimeout, "connect + handshake timeout of the client's own probe")
	sni := fs.String("sni", "", "SNI name to send (default: the host)")
	ip := fs.String("ip", "", "connect to this IP instead of resolving the host")
	fingerprint := fs.String("fingerprint", "", "check this fingerprint instead of probing: a SHA-1 (AA:BB:… or 40 hex digits; Forced Perspectives' converge(host, port, sha1)) or a SHA-256 (64 hex digits, asked of v1 notaries only)")
	api := fs.String("api", "auto", "notary API: auto (v1 for bundles that pin a pkie_v1_ed25519 key, Convergence otherwise) | convergence | v1")
	answerMaxAge := fs.Duration("answer-max-age", check.DefaultAnswerMaxAge, "a notary answer older than this does not vote: a v1 answer by its observation or signature, a Convergence answer by its newest observation")
	bounceVia := fs.String("bounce-via", "", "relay notary queries through this notary bundle's CONNECT listener (privacy)")
	allowPrivate := fs.Bool("allow-private", false, "allow probing loopback, private and other non-public addresses")
	resolve := command.AddResolveFlags(fs, "a site or a notary host", true)
	asJSON := fs.Bool("json", false, "print the verdict as JSON")
	proofs := addProofFlags(fs)
	cloud := addCloudFlags(fs)
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	host, port, err := command.OneTarget(pos)
	if err != nil {
		return err
	}

	cfg := check.Config{
		NotaryTimeout: *timeout,
		ProbeTimeout:  *probeTimeout,
		AllowPrivate:  *allowPrivate,
		CacheMaxAge:   *cacheMaxAge,
		TrustAgility:  *agility,
	}
	if *timeout <= 0 || *probeTimeout <= 0 || *cacheMaxAge <= 0 || *answerMaxAge <= 0 || *minDur < 0 {
		return command.UsageError("--timeout, --probe-timeout, --cache-max-age and --answer-max-age must be positive, --min-duration not negative")
	}
	cfg.AnswerMaxAge = *answerMaxAge
	if cfg.API, err = check.ParseAPI(*api); err != nil {
		return command.UsageError("--api: %v", err)
	}
	if cfg.Policy, err = check.ParsePolicy(*policy); err != nil {
		return command.UsageError("--policy: %v", err)
	}
	cfg.Policy.MinDuration, cfg.Policy.UnreachableIsFailure = *minDur, *unreachFail

	dir := *notaries
	if dir == "" {
		if dir, err = check.DefaultNotaryDir(); err != nil {
			return command.UsageError("%v; pass --notaries DIR", err)
		}
	}
	// With --cloud the notary enhancement is the cloud's: notaries of
	// one's own are asked too only if they are there.
	withCloud := len(cloud.clouds) > 0
	if cfg.Notaries, err = check.LoadNotaries(dir); err != nil {
		switch {
		case withCloud && *notaries == "" && errors.Is(err, os.ErrNotExist):
		case errors.Is(err, os.ErrNotExist):
			return command.UsageError("no notaries: %s does not exist; put Convergence .notary bundles there or pass --notaries DIR", dir)
		default:
			return command.UsageError("%v", err)
		}
	}
	if len(cfg.Notaries) == 0 && !withCloud {
		return command.UsageError("no notaries: %s holds no .notary bundles", dir)
	}
	if *bounceVia != "" {
		if cfg.BounceVia, err = check.ReadBundle(*bounceVia); err != nil {
			return command.UsageError("--bounce-via: %v", err)
		}
	}
	if *roots != "" {
		if cfg.Roots, err = LoadRoots(*roots); err != nil {
			return command.UsageError("--roots: %v", err)
		}
	}
	// An enhancement this binary was not built with is named before any
	// cloud is reached.
	if *require != "" {
		for _, r := range strings.Split(*require, ",") {
			if r = strings.TrimSpace(r); r != "" {
				if err := notBuiltIn(builtin.Registry(), r); err != nil {
					return err
				}
				cfg.Require = append(cfg.Require, r)
			}
		}
	}
	// Further evidence sources plug in here: append to cfg.Sources and list
	// their names in --require's help.
	// Everything the flags and files can get wrong is reported before
	// any network I/O: the cloud is reached only for a check that can be
	// made (as pkie pec get).
	var (
		ccfg        pec.ClientConfig
		cloudProofs *pec.CloudProofs
	)
	if withCloud {
		// The cloud proves; the TTP keys stay the client's own pins.
		if *proofs.ctProver != "" || *proofs.revProver != "" {
			return command.UsageError("--cloud proves ct and revocation itself: drop --ct-prover and --revocation-prover")
		}
		if ccfg, err = cloud.load(); err != nil {
			return err
		}
		cfg.Registry = builtin.Registry()
		if cfg.Verifiers, err = cloudVerifiers(env.Stderr, cfg.Registry, ccfg.Clouds, proofs.ct, *proofs.revKey, *proofs.maxAge); err != nil {
			return err
		}
		// The session is opened, and set here, once check.New has
		// accepted the configuration.
		cloudProofs = &pec.CloudProofs{Budget: *cloud.budget}
		cfg.Proofs = cloudProofs
	} else if cfg.Sources, err = proofs.sources(); err != nil {
		return err
	}
	if !*noCache {
		cfg.CachePath = *cachePath
		if cfg.CachePath == "" {
			if cfg.CachePath, err = check.DefaultCachePath(); err != nil {
				return command.UsageError("%v; pass --cache PATH or --no-cache", err)
			}
		}
	}
	if !resolve.Empty() {
		cfg.Lookup = resolve.Lookup
		cfg.NotaryDial = resolve.Dial
	}

	target, sha256FP, err := checkTarget(host, port, *sni, *ip, *fingerprint)
	if err != nil {
		return err
	}

	c, err := check.New(cfg)
	if err != nil {
		return command.UsageError("%v", strings.TrimPrefix(err.Error(), "check: "))
	}
	defer c.Close()
	if withCloud {
		cl, err := cloud.connect(ctx, ccfg)
		if err != nil {
			return err
		}
		defer cl.Close()
		cloudProofs.Cloud = cl
	}

	var v *check.Verdict
	if *fingerprint != "" {
		if sha256FP {
			_, v, err = c.ConvergeSHA256(ctx, host, port, *sni, *fingerprint)
		} else {
			_, v, err = c.Converge(ctx, host, port, *fingerprint)
		}
		if err != nil {
			return command.UsageError("%v", strings.TrimPrefix(err.Error(), "check: "))
		}
	} else {
		if v, err = c.Check(ctx, target); err != nil {
			return fmt.Errorf("%v%s", strings.TrimPrefix(err.Error(), "check: "), forbiddenHint(err))
		}
	}
	if *asJSON {
		if err := command.WriteJSON(env.Stdout, v); err != nil {
			return err
		}
	} else {
		printVerdict(env.Stdout, v)
	}
	switch {
	case v.Result == check.Trusted:
		return nil
	case v.Result == check.Inconclusive && *failOpen:
		fmt.Fprintln(env.Stderr, "pkie check: inconclusive, accepted because of --fail-open")
		return nil
	}
	return command.Negative()
}

// checkTarget checks what pkie check is to check: the site to probe, or
// with a fingerprint the fingerprint to ask the notaries about, which is
// a SHA-256 one if sha256FP.
func checkTarget(host string, port int, sni, ip, fingerprint string) (t probe.Target, sha256FP bool, err error) {
	t = probe.Target{Host: host, Port: port, ServerName: sni}
	if fingerprint != "" {
		if ip != "" {
			return t, false, command.UsageError("--fingerprint checks a fingerprint without connecting: --ip does not apply")
		}
		_, perr := check.ParseSHA256(fingerprint)
		if sha256FP = perr == nil; !sha256FP && sni != "" {
			return t, false, command.UsageError("--sni with --fingerprint needs a SHA-256 fingerprint: the Convergence API (SHA-1) cannot carry an SNI name")
		}
		return t, sha256FP, nil
	}
	if ip != "" {
		if t.IP, err = netip.ParseAddr(ip); err != nil {
			return t, false, command.UsageError("--ip %q is not an IP address", ip)
		}
	}
	return t, false, nil
}

// LoadRoots reads a PEM trust store, as pkie check --roots and pkie roots
// --export write them.
func LoadRoots(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificates", path)
	}
	return pool, nil
}

// printVerdict prints v for a person, its texts escaped as
// printPECResult's are: notaries, servers and clouds chose some of them.
func printVerdict(w io.Writer, v *check.Verdict) {
	fmt.Fprintf(w, "%s  %s  (policy %s)\n", termtext.Escape(v.Target), strings.ToUpper(string(v.Result)), v.Policy)
	fmt.Fprintf(w, "  %s\n", termtext.Escape(v.Headline))
	if v.SHA256 != "" {
		fmt.Fprintf(w, "  sha256   %s\n", v.SHA256)
	}
	if v.SHA1 != "" {
		fmt.Fprintf(w, "  sha1     %s\n", v.SHA1)
	}
	switch {
	case v.FromCache:
		fmt.Fprintf(w, "  notaries not asked: accepted %s ago (local cache)\n", v.CacheAge.Round(time.Second))
	case len(v.Notaries) == 0:
		fmt.Fprintln(w, "  notaries: none configured")
	default:
		fmt.Fprintln(w, "  notaries:")
		for _, a := range v.Notaries {
			status := "-"
			if a.Status != 0 {
				status = strconv.Itoa(a.Status)
			}
			via := ""
			if a.Bounced {
				via = " (bounced)"
			}
			api := string(a.API)
			if api == "" {
				api = "-"
			}
			fmt.Fprintf(w, "    %-16s %-12s %-11s %-4s %10s  %s%s\n", termtext.Escape(a.Notary), a.Vote, api, status, command.Millis(a.RoundTrip), termtext.Escape(a.Reason), via)
		}
	}
	fmt.Fprintln(w, "  sources:")
	for _, a := range v.Sources {
		req := "reported"
		if a.Required {
			req = "required"
		}
		fmt.Fprintf(w, "    %-16s %-12s %-8s  %s\n", termtext.Escape(a.Source), a.Status, req, termtext.Escape(a.Detail))
	}
	fmt.Fprintln(w, "  reasons:")
	for _, r := range v.Reasons {
		fmt.Fprintf(w, "    - %s\n", termtext.Escape(r))
	}
	t := v.Timings
	fmt.Fprintf(w, "  timings  probe %s, cache lookup %s, notaries %s (signature checks %s), sources %s, policy %s, total %s\n",
		command.Millis(t.Probe), command.Millis(t.CacheLookup), command.Millis(t.Notaries), command.Millis(t.SignatureChecks), command.Millis(t.Sources), command.Millis(t.Policy), command.Millis(t.Total))
}

// forbiddenHint names the address the probe's guard refused, which its
// error leaves out (a service must not tell its clients where their names
// resolve): the user of a local command may see it.
func forbiddenHint(err error) string {
	var fe *probe.ForbiddenAddressError
	if !errors.As(err, &fe) {
		return ""
	}
	return fmt.Sprintf(" (address %s; --allow-private allows it)", fe.Addr)
}
