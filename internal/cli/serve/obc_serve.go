package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/obc"
	"github.com/pkie/pkie/obc/server"
)

// OBCSessionCookie is the demo site's session cookie.
const OBCSessionCookie = "pkie_obc_session"

// obcMaxForm bounds the login form: a user name and little else.
const obcMaxForm = 4 << 10

// OBCServe is "pkie obc serve": a small site demonstrating channel-bound
// cookies. / says which client key the channel carries, /login sets a
// session cookie bound to it, /whoami reads the session back, and a cookie
// copied to another client gets a page saying it is bound to another
// client (and a warning in the server's log).
func OBCServe(ctx context.Context, env *command.Env, args []string) error {
	fs := command.NewFlags(env, "obc serve", "[--addr ADDR] [--cert FILE --key FILE | --name NAME ... --write-cert FILE] [--key-file FILE] [--mode strict|legacy] [flags]")
	addr := fs.String("addr", "127.0.0.1:8443", "`ADDR` to serve HTTPS on")
	certFile := fs.String("cert", "", "the server's certificate chain, PEM, leaf first (default: a self-signed certificate made at start, its pin printed)")
	keyFile := fs.String("key", "", "the --cert's private key, PEM")
	var names []string
	fs.Func("name", "a DNS name or IP address for the generated certificate, besides localhost, 127.0.0.1 and ::1 (\"*.example.com\" for subdomains). Repeatable", func(s string) error {
		for _, n := range command.SplitList(s) {
			names = append(names, n)
		}
		return nil
	})
	writeCert := fs.String("write-cert", "", "write the generated certificate, PEM, to `FILE` (for \"pkie obc get --cacert FILE\")")
	binderKey := fs.String("key-file", "", "the cookie-binding key `FILE`, created (0600) if absent; a file others may read is refused (default: a key for this run only). Sessions live in memory and end with the server either way; with the key kept, a cookie from an earlier run is told its session ended rather than refused as forged")
	modeName := fs.String("mode", "strict", "strict: host-only cookies, for clients with a key per origin; legacy: cookies for the registrable domain, for clients with a key per domain (the paper's §7.1)")
	requireCert := fs.Bool("require-cert", false, "fail the TLS handshake of a client without a certificate (default: serve it a page saying what it lacks)")
	ttl := fs.Duration("session-ttl", 24*time.Hour, "how long a session lives after login")
	maxSessions := fs.Int("max-sessions", 65536, "sessions held at most (in memory); a login beyond is refused with 503")
	sessionsPerIP := fs.Int("max-sessions-per-ip", 256, "sessions held at most for one client address; a login beyond is refused with 429")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on one request")
	maxInFlight := fs.Int("max-in-flight", 256, "requests being handled at once at most")
	perIP := fs.Int("max-in-flight-per-ip", 32, "requests being handled at once at most for one client address")
	jsonOut := fs.Bool("json", false, "print the startup line and the logs as JSON")
	conns := connFlags(fs)
	pos, err := command.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	co, err := conns()
	if err != nil {
		return err
	}
	mode, err := obc.ParseMode(*modeName)
	switch {
	case len(pos) != 0:
		return command.UsageError("obc serve takes no arguments, got %q", pos)
	case err != nil:
		return command.UsageError("--mode %q: want strict or legacy", *modeName)
	case (*certFile == "") != (*keyFile == ""):
		return command.UsageError("--cert and --key go together")
	case *certFile != "" && (len(names) > 0 || *writeCert != ""):
		return command.UsageError("--name and --write-cert are for the generated certificate; drop them with --cert")
	case *ttl <= 0:
		return command.UsageError("--session-ttl must be positive")
	case *timeout <= 0:
		return command.UsageError("--timeout must be positive")
	case *maxInFlight <= 0 || *perIP <= 0:
		return command.UsageError("--max-in-flight and --max-in-flight-per-ip must be positive")
	case *maxSessions <= 0 || *sessionsPerIP <= 0:
		return command.UsageError("--max-sessions and --max-sessions-per-ip must be positive")
	}
	if err := command.CheckOutput("--write-cert", *writeCert); err != nil {
		return err
	}
	var logger *slog.Logger
	if *jsonOut {
		logger = slog.New(slog.NewJSONHandler(env.Stderr, nil))
	} else {
		logger = slog.New(slog.NewTextHandler(env.Stderr, nil))
	}

	var key []byte
	keyCreated := false
	if *binderKey != "" {
		if key, keyCreated, err = server.LoadOrCreateKeyFile(*binderKey); err != nil {
			return command.UsageError("--key-file: %v", err)
		}
	} else {
		key = make([]byte, server.MinKeySize)
		rand.Read(key)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	defer ln.Close()
	var cert tls.Certificate
	generated := *certFile == ""
	if generated {
		host, _, _ := net.SplitHostPort(*addr)
		cert, err = obcServerCert(append(names, host))
		if err != nil {
			return err
		}
		if *writeCert != "" {
			p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
			if err := os.WriteFile(*writeCert, p, 0o644); err != nil {
				return fmt.Errorf("--write-cert: %w", err)
			}
		}
	} else if cert, err = tls.LoadX509KeyPair(*certFile, *keyFile); err != nil {
		return command.UsageError("--cert/--key: %v", err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return command.UsageError("--cert: %v", err)
		}
	}
	spki := sha256.Sum256(cert.Leaf.RawSubjectPublicKeyInfo)
	pin := "sha256/" + base64.StdEncoding.EncodeToString(spki[:])

	sessions, err := server.NewSessions(server.SessionLimits{TTL: *ttl, Max: *maxSessions, PerClient: *sessionsPerIP, PerIdentity: obcSessionsPerKey}, nil)
	if err != nil {
		return command.UsageError("%v", err)
	}
	site := &obcSite{
		binder:   &server.Binder{Key: key, Mode: mode, Logger: logger},
		sessions: sessions, mode: mode, ttl: *ttl, logger: logger,
	}
	var opts []server.Option
	if *requireCert {
		opts = append(opts, server.RequireCertificate())
	}
	tc := server.TLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}, opts...)
	slots := httplimit.NewSlots(*maxInFlight, *perIP)
	srv := &http.Server{
		Handler: httplimit.Handler(site.handler(), httplimit.HandlerOptions{
			Pool: func(*http.Request) *httplimit.Slots { return slots }, Timeout: *timeout,
		}),
		TLSConfig:         tc,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	limited := httplimit.Listen(srv, ln, co)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	url := "https://" + ln.Addr().String()
	if *jsonOut {
		b, _ := json.Marshal(map[string]any{
			"listening": ln.Addr().String(), "url": url, "mode": mode.String(),
			"cert_generated": generated, "cert_file": *writeCert, "pin_sha256": pin,
			"binder_key": *binderKey, "binder_key_created": keyCreated,
		})
		fmt.Fprintf(env.Stdout, "%s\n", b)
	} else {
		fmt.Fprintf(env.Stdout, "listening %s (mode %s)\n", url, mode)
		if generated {
			fmt.Fprintf(env.Stdout, "server certificate: generated, self-signed for %s; SPKI pin %s\n", strings.Join(cert.Leaf.DNSNames, ", ")+obcIPs(cert.Leaf), pin)
			if *writeCert != "" {
				get := fmt.Sprintf("pkie obc get --cacert %s --cookie-jar obc-cookies.json", *writeCert)
				fmt.Fprintf(env.Stdout, "  saved to %s; log in, see who you are, log out:\n"+
					"    %s -X POST -d user=alice %s/login\n    %s %s/whoami\n    %s -X POST %s/logout\n",
					*writeCert, get, url, get, url, get, url)
			}
		} else {
			fmt.Fprintf(env.Stdout, "server certificate: %s; SPKI pin %s\n", *certFile, pin)
		}
		switch {
		case *binderKey == "":
			fmt.Fprintln(env.Stdout, "cookie key: for this run only (--key-file keeps sessions across restarts)")
		case keyCreated:
			fmt.Fprintf(env.Stdout, "cookie key: created %s (0600)\n", *binderKey)
		default:
			fmt.Fprintf(env.Stdout, "cookie key: %s\n", *binderKey)
		}
	}
	logger.Info("obc serve listening", "addr", ln.Addr().String(), "mode", mode.String(), "pin_sha256", pin, "require_cert", *requireCert)
	err = srv.ServeTLS(limited, "", "")
	logger.Info("obc serve stopped")
	if err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		return err
	}
	return nil
}

func obcIPs(c *x509.Certificate) string {
	var s string
	for _, ip := range c.IPAddresses {
		s += ", " + ip.String()
	}
	return s
}

// obcServerCert makes a self-signed ECDSA P-256 server certificate for
// localhost, its loopback addresses and names (an empty or unspecified
// address is skipped), valid for 30 days.
func obcServerCert(names []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "pkie obc serve"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // so that it can be its own --cacert
	}
	seen := map[string]bool{}
	for _, n := range append([]string{"localhost", "127.0.0.1", "::1"}, names...) {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		if ip := net.ParseIP(n); ip != nil {
			if !ip.IsUnspecified() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
			continue
		}
		tmpl.DNSNames = append(tmpl.DNSNames, n)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// obcSessionsPerKey bounds the sessions one client key holds: logging in
// again beyond it ends that key's oldest session.
const obcSessionsPerKey = 16

// obcSite is the demonstration site.
type obcSite struct {
	binder   *server.Binder
	sessions *server.Sessions
	mode     obc.Mode
	ttl      time.Duration
	logger   *slog.Logger
}

func (s *obcSite) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.home)
	mux.Handle("POST /login", server.Require(http.HandlerFunc(s.login)))
	mux.Handle("GET /whoami", server.Require(http.HandlerFunc(s.whoami)))
	mux.Handle("POST /logout", server.Require(http.HandlerFunc(s.logout)))
	return mux
}

// obcPage is what every page shows.
type obcPage struct {
	Title    string `json:"-"`
	Message  string `json:"message,omitempty"`
	Error    string `json:"error,omitempty"`
	Identity string `json:"identity,omitempty"` // hex; empty without a client certificate
	Subject  string `json:"certificate_subject,omitempty"`
	TLS      string `json:"tls_version,omitempty"`
	Mode     string `json:"mode"`
	User     string `json:"user,omitempty"`
	Since    string `json:"logged_in_at,omitempty"`
	Form     bool   `json:"-"`
}

var obcTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}} — pkie obc serve</title></head>
<body>
<h1>{{.Title}}</h1>
{{if .Error}}<p><strong>{{.Error}}</strong></p>{{end}}
{{if .Message}}<p>{{.Message}}</p>{{end}}
{{if .Identity}}<p>Your channel's identity (SHA-256 of your client certificate's public key): <code>{{.Identity}}</code><br>
Certificate subject (chosen by your client, vouching for nothing): <code>{{.Subject}}</code><br>
{{.TLS}}, cookies bound in {{.Mode}} mode.</p>
{{else}}<p>Your client presented no TLS client certificate. This site binds its cookies to the key of an origin-bound client certificate: use <code>pkie obc get</code>, or any client with a (self-signed) certificate.</p>{{end}}
{{if .User}}<p>Logged in as <strong>{{.User}}</strong> since {{.Since}}.</p>
<form method="post" action="/logout"><button>Log out</button></form>{{end}}
{{if .Form}}<form method="post" action="/login"><label>User name <input name="user" maxlength="64"></label> <button>Log in</button></form>{{end}}
<p><a href="/">home</a> · <a href="/whoami">/whoami</a></p>
</body></html>
`))

// render answers with p as JSON if the client asks for it, else HTML.
func (s *obcSite) render(w http.ResponseWriter, r *http.Request, code int, p obcPage) {
	p.Mode = s.mode.String()
	if id, ok := server.Identity(r); ok {
		p.Identity = id.String()
		p.Subject = r.TLS.PeerCertificates[0].Subject.String()
	}
	if r.TLS != nil {
		p.TLS = tls.VersionName(r.TLS.Version)
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(p)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action 'self'")
	w.WriteHeader(code)
	obcTemplate.Execute(w, p)
}

func (s *obcSite) home(w http.ResponseWriter, r *http.Request) {
	p := obcPage{Title: "Who you are", Form: true}
	if sess, err := s.session(r); err == nil {
		p.User, p.Since, p.Form = sess.User, sess.Start.UTC().Format(time.RFC3339), false
	}
	s.render(w, r, http.StatusOK, p)
}

// session reads the bound session cookie, which carries a session id, and
// returns the live session it names.
func (s *obcSite) session(r *http.Request) (server.Session, error) {
	sid, err := s.binder.Cookie(r, OBCSessionCookie)
	if err != nil {
		return server.Session{}, err
	}
	id, _ := server.Identity(r) // Cookie verified the channel has one
	sess, ok := s.sessions.Lookup(sid, id)
	if !ok {
		return server.Session{}, errSessionEnded
	}
	return sess, nil
}

// errSessionEnded: the cookie is this server's and bound to this channel,
// but its session was logged out, expired, or began before a restart.
var errSessionEnded = errors.New("session ended")

func (s *obcSite) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, obcMaxForm)
	if err := r.ParseForm(); err != nil {
		code := http.StatusBadRequest
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			code = http.StatusRequestEntityTooLarge
		}
		s.render(w, r, code, obcPage{Title: "Log in", Error: fmt.Sprintf("unreadable form (at most %d bytes)", obcMaxForm), Form: true})
		return
	}
	user := strings.TrimSpace(r.PostForm.Get("user"))
	if msg := obcCheckUser(user); msg != "" {
		s.render(w, r, http.StatusBadRequest, obcPage{Title: "Log in", Error: msg, Form: true})
		return
	}
	id, _ := server.Identity(r) // Require let only a channel with one in
	sess, err := s.sessions.Start(id, httplimit.RequestClientKey(r).String(), user)
	if err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, server.ErrClientSessionsFull) {
			code = http.StatusTooManyRequests
		}
		s.logger.Warn("obc: login refused", "err", err, "identity", id.String(), "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", "60")
		s.render(w, r, code, obcPage{Title: "Log in", Error: "too many sessions: log out of one, or try again later", Form: true})
		return
	}
	c := &http.Cookie{Name: OBCSessionCookie, Value: sess.ID, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: int(s.ttl / time.Second)}
	if err := s.binder.SetCookie(w, r, c); err != nil {
		s.sessions.End(sess.ID, id)
		s.logger.Error("obc: session cookie not set", "err", err)
		s.render(w, r, http.StatusInternalServerError, obcPage{Title: "Log in", Error: "the session cookie could not be set", Form: true})
		return
	}
	s.logger.Info("obc: login", "user", user, "identity", id.String(), "remote", r.RemoteAddr, "host", r.Host)
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		s.render(w, r, http.StatusOK, obcPage{Title: "Logged in", User: user, Since: sess.Start.UTC().Format(time.RFC3339), Message: "session cookie set, bound to your client's key"})
		return
	}
	http.Redirect(w, r, "/whoami", http.StatusSeeOther)
}

// obcCheckUser returns why user is not an acceptable name, or "".
func obcCheckUser(user string) string {
	switch {
	case user == "":
		return "give a user name"
	case len(user) > 64:
		return "a user name has at most 64 bytes"
	case !utf8.ValidString(user):
		return "a user name is UTF-8"
	}
	for _, c := range user {
		if !unicode.IsPrint(c) {
			return "a user name has printable characters only"
		}
	}
	return ""
}

func (s *obcSite) whoami(w http.ResponseWriter, r *http.Request) {
	sess, err := s.session(r)
	var mm *server.MismatchError
	switch {
	case err == nil:
		s.render(w, r, http.StatusOK, obcPage{Title: "Who you are", User: sess.User, Since: sess.Start.UTC().Format(time.RFC3339),
			Message: "Your session cookie is bound to the key your client presented on this connection."})
	case errors.Is(err, http.ErrNoCookie):
		s.render(w, r, http.StatusUnauthorized, obcPage{Title: "Not logged in", Error: "not logged in: no session cookie", Form: true})
	case errors.As(err, &mm):
		s.render(w, r, http.StatusForbidden, obcPage{Title: "This cookie is bound to another client",
			Error: "this cookie is bound to another client",
			Message: "The session cookie sent was set for a client holding another key than the one your client presented on this connection: " +
				"it was copied from that client. A channel-bound cookie is useless anywhere else. The server has logged this. Log in to get your own.",
			Form: true})
	case errors.Is(err, server.ErrUnbound):
		s.render(w, r, http.StatusForbidden, obcPage{Title: "Cookie refused", Error: "the session cookie carries no valid binding (altered, or set under another key)", Form: true})
	case errors.Is(err, errSessionEnded):
		s.render(w, r, http.StatusUnauthorized, obcPage{Title: "Session ended", Error: "session ended (logged out, expired, or the server restarted): log in again", Form: true})
	default:
		s.logger.Error("obc: session", "err", err)
		s.render(w, r, http.StatusInternalServerError, obcPage{Title: "Error", Error: "the session could not be read", Form: true})
	}
}

// logout ends the session on the server, so that no copy of its cookie
// opens it again, then asks the client to drop the cookie. Only the
// channel the session is bound to can end it: a cookie copied to another
// client does not log its owner out.
func (s *obcSite) logout(w http.ResponseWriter, r *http.Request) {
	msg := "logged out: no session to end"
	if sid, err := s.binder.Cookie(r, OBCSessionCookie); err == nil {
		id, _ := server.Identity(r)
		if s.sessions.End(sid, id) {
			msg = "logged out: the session is ended on the server"
			s.logger.Info("obc: logout", "identity", id.String(), "remote", r.RemoteAddr, "host", r.Host)
		}
	}
	c := &http.Cookie{Name: OBCSessionCookie, Value: "", Path: "/", Secure: true, HttpOnly: true, MaxAge: -1}
	if s.mode == obc.Legacy {
		// Deleting a domain cookie takes its Domain; SetCookie with
		// MaxAge -1 sets the same attributes.
		if err := s.binder.SetCookie(w, r, c); err != nil {
			s.logger.Error("obc: logout", "err", err)
		}
	} else {
		http.SetCookie(w, c)
	}
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		s.render(w, r, http.StatusOK, obcPage{Title: "Logged out", Message: msg})
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
