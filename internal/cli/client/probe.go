package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/netip"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/probe"
)

func Probe(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "probe", "[flags] HOST[:PORT]")
	sni := fs.String("sni", "", "SNI name to send (default: the host)")
	ip := fs.String("ip", "", "connect to this IP instead of resolving the host")
	timeout := fs.Duration("timeout", probe.DefaultTimeout, "connect + handshake timeout")
	allowPrivate := fs.Bool("allow-private", false, "allow loopback, private and other non-public addresses")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	host, port, err := command.OneTarget(pos)
	if err != nil {
		return err
	}
	t := probe.Target{Host: host, Port: port, ServerName: *sni}
	if *ip != "" {
		a, err := netip.ParseAddr(*ip)
		if err != nil {
			return command.UsageError("--ip %q is not an IP address", *ip)
		}
		t.IP = a
	}
	obs, err := probe.New(probe.Options{Timeout: *timeout, AllowPrivate: *allowPrivate}).Probe(ctx, t)
	if err != nil {
		return fmt.Errorf("%w%s", err, forbiddenHint(err))
	}
	if *asJSON {
		return command.WriteJSON(env.Stdout, observationJSON(obs))
	}
	fmt.Fprintf(env.Stdout, "target      %s (sni %q) via %s\n", t, t.SNI(), obs.Addr)
	fmt.Fprintf(env.Stdout, "tls         %s, %s\n", tls.VersionName(obs.Version), tls.CipherSuiteName(obs.CipherSuite))
	fmt.Fprintf(env.Stdout, "sha256      %s\n", hex.EncodeToString(obs.SHA256[:]))
	fmt.Fprintf(env.Stdout, "sha1        %s\n", obs.FingerprintSHA1())
	fmt.Fprintf(env.Stdout, "timings     dns %s, connect %s, handshake %s, total %s\n",
		command.Millis(obs.Timings.DNS), command.Millis(obs.Timings.Connect), command.Millis(obs.Timings.Handshake), command.Millis(obs.Timings.Total))
	for i, der := range obs.Chain {
		subj := "(unparseable)"
		if c, err := x509.ParseCertificate(der); err == nil {
			subj = c.Subject.String() + "  issued by " + c.Issuer.String()
		}
		fmt.Fprintf(env.Stdout, "chain[%d]    %s\n", i, subj)
	}
	return nil
}

// ObservationJSON is the JSON form of a probe observation.
type ObservationJSON struct {
	Host        string        `json:"host"`
	Port        int           `json:"port"`
	SNI         string        `json:"sni"`
	Addr        string        `json:"addr"`
	Time        time.Time     `json:"time"`
	TLSVersion  string        `json:"tls_version"`
	CipherSuite string        `json:"cipher_suite"`
	SHA256      string        `json:"sha256"`
	SHA1        string        `json:"sha1"`
	Chain       []string      `json:"chain"`
	Timings     probe.Timings `json:"timings"`
}

func observationJSON(o *probe.Observation) ObservationJSON {
	j := ObservationJSON{
		Host: o.Target.Host, Port: o.Target.Port, SNI: o.Target.SNI(), Addr: o.Addr.String(), Time: o.Time,
		TLSVersion: tls.VersionName(o.Version), CipherSuite: tls.CipherSuiteName(o.CipherSuite),
		SHA256: hex.EncodeToString(o.SHA256[:]), SHA1: o.FingerprintSHA1(), Timings: o.Timings,
	}
	for _, der := range o.Chain {
		j.Chain = append(j.Chain, base64.StdEncoding.EncodeToString(der))
	}
	return j
}
