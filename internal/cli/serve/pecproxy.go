package serve

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/pec"
)

// PECProxy is "pkie pec-proxy": a TLS-terminating reverse proxy whose
// listener is a PEC server (pec.Listener), so that any HTTP backend serves
// PEC clients in the client–server deployment.
func PECProxy(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "pec-proxy", "--listen ADDR --cert FILE --key FILE --backend URL --cloud-allow ADDR[,ADDR] [flags]")
	listen := fs.String("listen", ":443", "`ADDR` to serve TLS on")
	certFile := fs.String("cert", "", "the server's certificate chain, PEM, leaf first (required)")
	keyFile := fs.String("key", "", "the certificate's private key, PEM (required)")
	backend := fs.String("backend", "", "`URL` of the HTTP backend the requests go to, e.g. http://127.0.0.1:8080 (required)")
	var allow []pec.AllowedCloud
	fs.Func("cloud-allow", "points of presence the server forwards chains to, `ADDR[,ADDR]`: [quic://|tcp://]host:port (no scheme: both); the cloud's key is not pinned (use --cloud-bundle to pin it). Repeatable", func(s string) error {
		for _, a := range command.SplitList(s) {
			as, err := parseAllow(a)
			if err != nil {
				return err
			}
			allow = append(allow, as...)
		}
		return nil
	})
	fs.Func("cloud-bundle", "allow every point of presence of a cloud's bundle `FILE`, pinned to its key. Repeatable", func(s string) error {
		b, err := pecwire.ReadBundle(s)
		if err != nil {
			return err
		}
		as, err := pec.AllowBundle(b)
		if err != nil {
			return err
		}
		allow = append(allow, as...)
		return nil
	})
	rate := fs.Float64("forward-rate", pec.DefaultForwardRate, "chains forwarded per second at most, over all clients")
	burst := fs.Int("forward-burst", pec.DefaultForwardBurst, "chains forwarded at once at most, over all clients")
	ipRate := fs.Float64("forward-rate-per-ip", pec.DefaultPerClientRate, "chains forwarded per second at most for one client address")
	ipBurst := fs.Int("forward-burst-per-ip", pec.DefaultPerClientBurst, "chains forwarded at once at most for one client address")
	port := fs.Int("public-port", 0, "the port clients connect to, when a port mapping makes it differ from --listen's (0: --listen's)")
	timeout := fs.Duration("timeout", httplimit.DefaultTimeout, "bound on one request, backend included")
	maxInFlight := fs.Int("max-in-flight", 256, "requests being proxied at once at most")
	perIP := fs.Int("max-in-flight-per-ip", 32, "requests being proxied at once at most for one client address")
	jsonOut := fs.Bool("json", false, "print the startup line and the logs as JSON")
	sctList := fs.String("sct-list", "", "a TLS SignedCertificateTimestampList `FILE` (binary, RFC 6962 §3.3) the server sends in the signed_certificate_timestamp extension, and forwards to the cloud with its chain")
	conns := connFlags(fs)
	if _, err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	co, err := conns()
	if err != nil {
		return err
	}
	switch {
	case *certFile == "" || *keyFile == "":
		return command.UsageError("--cert and --key are required")
	case *backend == "":
		return command.UsageError("--backend is required")
	case len(allow) == 0:
		return command.UsageError("--cloud-allow or --cloud-bundle is required: a PEC server forwards only to clouds it allows")
	case *rate <= 0 || *burst <= 0 || *ipRate <= 0 || *ipBurst <= 0:
		return command.UsageError("the --forward-* rates and bursts must be positive")
	case *port < 0 || *port > 65535:
		return command.UsageError("--public-port: %d is not 0-65535", *port)
	case *maxInFlight <= 0 || *perIP <= 0:
		return command.UsageError("--max-in-flight and --max-in-flight-per-ip must be positive")
	}
	target, err := url.Parse(*backend)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return command.UsageError("--backend %q: want an http:// or https:// URL", *backend)
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return command.UsageError("--cert/--key: %v", err)
	}
	if *sctList != "" {
		if cert.SignedCertificateTimestamps, err = command.ReadSCTList(*sctList); err != nil {
			return err
		}
	}
	var logger *slog.Logger
	if *jsonOut {
		logger = slog.New(slog.NewJSONHandler(env.Stderr, nil))
	} else {
		logger = slog.New(slog.NewTextHandler(env.Stderr, nil))
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	defer ln.Close()
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.SetXForwarded()
			r.Out.Host = r.In.Host
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			logger.Warn("backend failed", "method", r.Method, "path", r.URL.Path, "err", err)
			httplimit.Error(w, http.StatusBadGateway, "the backend did not answer")
		},
	}
	slots := httplimit.NewSlots(*maxInFlight, *perIP)
	srv := &http.Server{
		Handler: httplimit.Handler(proxy, httplimit.HandlerOptions{
			Pool: func(*http.Request) *httplimit.Slots { return slots }, Timeout: *timeout,
		}),
		TLSConfig:         tc,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	limited := httplimit.Listen(srv, ln, co)
	pl, err := pec.NewListener(limited, pec.ServerConfig{
		TLSConfig: tc, Clouds: allow, Port: *port,
		ForwardRate: *rate, ForwardBurst: *burst, PerClientRate: *ipRate, PerClientBurst: *ipBurst,
		HelloTimeout: srv.ReadHeaderTimeout, Logger: logger,
	})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	var clouds []string
	for _, a := range allow {
		clouds = append(clouds, a.Addr.String())
	}
	if *jsonOut {
		b, _ := json.Marshal(map[string]any{"listening": ln.Addr().String(), "backend": target.String(), "clouds": clouds})
		fmt.Fprintf(env.Stdout, "%s\n", b)
	} else {
		fmt.Fprintf(env.Stdout, "listening %s\n", ln.Addr())
	}
	logger.Info("pec-proxy listening", "addr", ln.Addr().String(), "backend", target.String(), "clouds", strings.Join(clouds, ","))
	err = srv.ServeTLS(pl, "", "")
	pl.Close()
	st := pl.Stats()
	logger.Info("pec-proxy stopped", "hellos", st.Hellos, "with_extension", st.WithExtension, "forwarded", st.Forwarded,
		"not_allowed", st.NotAllowed, "rate_limited", st.RateLimited, "failed", st.Failed, "rejected", st.Rejected)
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// parseAllow parses one --cloud-allow entry.
func parseAllow(s string) ([]pec.AllowedCloud, error) {
	transports := []string{pecwire.QUIC, pecwire.TCP}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		if scheme != pecwire.QUIC && scheme != pecwire.TCP {
			return nil, fmt.Errorf("%q: scheme %q, want quic:// or tcp://", s, scheme)
		}
		transports, s = []string{scheme}, rest
	}
	var out []pec.AllowedCloud
	for _, t := range transports {
		a := pec.Addr{Transport: t, HostPort: s}
		if err := a.Check(); err != nil {
			return nil, err
		}
		out = append(out, pec.AllowedCloud{Addr: a})
	}
	return out, nil
}
