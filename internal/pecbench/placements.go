package pecbench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"slices"
	"time"

	"github.com/pkie/pkie/internal/option"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/pec"
)

// The latency study (`pkie bench pec --placements`) repeats the PEC paper's
// Amazon experiment (§6.2, Figure 5) and its footprint comparison (§6.3.1,
// Figure 6) with real handshakes on loopback: client, server and cloud are
// placed on an RTT matrix of data centres, the site sits behind a TCP delay
// proxy at the client–server round trip, the cloud behind a UDP delay
// proxy at the client–cloud round trip, and every placement is measured as
// plain TLS and in each PEC deployment, several times, over TLS 1.2 and
// TLS 1.3. All round trips are divided by Scale so a run takes minutes;
// relative inflation does not depend on the scale, but the fixed
// processing times (handshake crypto, proving, verifying) weigh Scale
// times more against the network than they would at real distances.

// Deployments.
const (
	// DeployClientOnly: the client forwards the server's chain to the
	// cloud when its handshake delivers it (pec.Dialer).
	DeployClientOnly = "client-only"
	// DeployClientServer: the server forwards its chain when the
	// ClientHello arrives (the PEC TLS extension, PEC paper §4.1).
	DeployClientServer = "client-server"
)

// Cloud selections and footprints.
const (
	SelectRandom  = "random"  // client, server and cloud: three distinct regions at random
	SelectNearest = "nearest" // client and server at random, the cloud nearest the client (the paper's "smart" model)

	FootprintRegions = "aws-14"  // the cloud runs in the 14 regions
	FootprintPoP     = "pop-all" // a point of presence next to every client (the paper's Akamai case)
)

// Paper figures for the study.
const (
	PaperUnder1ClientOnly   = 0.85  // §6.2: nearest cloud, inflation under 1%
	PaperUnder1ClientServer = 0.91  //
	PaperTLS13MeanInflation = 0.065 // Appendix A
)

// DefaultPlacements is how many placements of each model the PEC paper
// draws (§6.2).
const DefaultPlacements = 150

// StudyConfig says what the latency study measures. Zero values take the
// defaults, but for the placement counts.
type StudyConfig struct {
	// Placements per model: random and nearest on the 14 regions, and
	// nearest on the large footprint. Unlike the fields below, zero means
	// none, so that a model can be left out; the paper draws
	// DefaultPlacements of each. At least one must be positive.
	Random, Nearest, Footprint int
	// Reps is how many times each placement is measured in each mode;
	// the mean is used, as the paper does with its 20.
	Reps int
	// Versions are the TLS versions measured (1.2 and 1.3).
	Versions []uint16
	// Scale divides every round trip (10).
	Scale float64
	// FibreFactor is the fibre route's length over the great circle.
	FibreFactor float64
	// PoPRTT is the client's round trip to its point of presence in the
	// large footprint, at real scale.
	PoPRTT time.Duration
	// Seed makes the placements repeatable.
	Seed uint64
	// LogFill and RevokedFill size the trees as in Config.
	LogFill, RevokedFill int
	// Progress receives a line per placement; nil for none.
	Progress io.Writer
}

func (c *StudyConfig) defaults() {
	if c.Reps <= 0 {
		c.Reps = 5
	}
	if len(c.Versions) == 0 {
		c.Versions = []uint16{tls.VersionTLS12, tls.VersionTLS13}
	}
	if c.Scale == 0 {
		c.Scale = 10
	}
	if c.FibreFactor == 0 {
		c.FibreFactor = DefaultFibreFactor
	}
	if c.PoPRTT == 0 {
		c.PoPRTT = DefaultPoPRTT
	}
	if c.Seed == 0 {
		c.Seed = 2017
	}
	if c.LogFill == 0 {
		c.LogFill = 4095
	}
	if c.RevokedFill == 0 {
		c.RevokedFill = PaperRevokedLeaves
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// The largest fills a study builds its trees with: beyond them the
// trees take longer to build than the study to run.
const (
	MaxLogFill     = 1 << 20
	MaxRevokedFill = 1 << 24
)

// Check reports what is wrong with c before anything runs, zero fields
// taking their defaults, as an *option.Error naming c's fields.
func (c *StudyConfig) Check() error { return c.check(false) }

// Validate is Check for a config a command gives with every field
// explicit, its flags defaulting to the defaults: a zero Reps, Scale,
// FibreFactor or PoPRTT is refused rather than taken as the default, and
// LogFill and RevokedFill are counts, zero meaning none (set such a fill
// to -1 before RunStudy, to which zero means the default).
func (c *StudyConfig) Validate() error { return c.check(true) }

func (c *StudyConfig) check(explicit bool) error {
	n := len(PaperRegions)
	one := func(f string) []string { return []string{f} }
	switch {
	case c.Random < 0 || c.Nearest < 0 || c.Footprint < 0 || c.Random+c.Nearest+c.Footprint == 0:
		return studyErr([]string{"Random", "Nearest", "Footprint"}, "Random, Nearest and Footprint must not be negative, and not all zero")
	case c.Random > n*(n-1)*(n-2):
		return studyErr(one("Random"), "Random %d: %d regions give %d distinct random placements", c.Random, n, n*(n-1)*(n-2))
	case c.Nearest > n*(n-1) || c.Footprint > n*(n-1):
		return studyErr([]string{"Nearest", "Footprint"}, "Nearest and Footprint must be at most %d: %d regions give %d distinct client–server pairs", n*(n-1), n, n*(n-1))
	case explicit && c.Reps < 1:
		return studyErr(one("Reps"), "Reps must be at least 1")
	// Written !(x >= 1) so that NaN, which the flag parser accepts, is
	// refused too.
	case (c.Scale != 0 || explicit) && !(c.Scale >= 1):
		return studyErr(one("Scale"), "Scale %v: round trips are divided by it, so at least 1", c.Scale)
	case (c.FibreFactor != 0 || explicit) && !(c.FibreFactor >= 1):
		return studyErr(one("FibreFactor"), "FibreFactor %v: the fibre-path factor is below 1", c.FibreFactor)
	case explicit && c.PoPRTT <= 0:
		return studyErr(one("PoPRTT"), "PoPRTT must be positive")
	case c.PoPRTT < 0:
		return studyErr(one("PoPRTT"), "PoPRTT must not be negative")
	case explicit && (c.LogFill < 0 || c.RevokedFill < 0), c.LogFill > MaxLogFill || c.RevokedFill > MaxRevokedFill:
		return studyErr([]string{"LogFill", "RevokedFill"}, "LogFill must be 0 to %d and RevokedFill 0 to %d", MaxLogFill, MaxRevokedFill)
	}
	for _, v := range c.Versions {
		if v != tls.VersionTLS12 && v != tls.VersionTLS13 {
			return studyErr(one("Versions"), "Versions: TLS version %#x: the study measures 1.2 and 1.3", v)
		}
	}
	if explicit && len(c.Versions) == 0 {
		return studyErr(one("Versions"), "Versions: none given")
	}
	return nil
}

func studyErr(fields []string, format string, a ...any) error {
	return option.Errorf("pecbench", fields, format, a...)
}

// Study is a whole latency study.
type Study struct {
	Machine     Machine    `json:"machine"`
	Started     time.Time  `json:"started"`
	Seconds     float64    `json:"seconds"`
	Scale       float64    `json:"scale"`
	FibreFactor float64    `json:"fibre_factor"`
	PoPRTTms    float64    `json:"pop_rtt_ms"`
	Reps        int        `json:"reps"`
	Matrix      *RTTMatrix `json:"matrix"`
	// Deployments are the modes measured; NotMeasured the others, each
	// with the reason.
	Deployments []string          `json:"deployments"`
	NotMeasured map[string]string `json:"not_measured,omitempty"`
	Placements  []Placement       `json:"placements"`
	Summaries   []StudySummary    `json:"summaries"`
}

// Placement is one placement measured over one TLS version. Round trips
// are at real scale; times are as measured, at the emulated scale.
type Placement struct {
	Footprint string `json:"footprint"`
	Selection string `json:"selection"`
	Client    string `json:"client"`
	Server    string `json:"server"`
	// Cloud is a region, or "pop" for the large footprint's point of
	// presence in the client's metro.
	Cloud            string  `json:"cloud"`
	ServerRTTms      float64 `json:"client_server_rtt_ms"`
	CloudRTTms       float64 `json:"client_cloud_rtt_ms"`
	ServerCloudRTTms float64 `json:"server_cloud_rtt_ms"`
	TLS              string  `json:"tls"`
	// BaselineMs is the mean plain TLS handshake.
	BaselineMs float64         `json:"baseline_ms"`
	Runs       []DeploymentRun `json:"runs"`
}

// DeploymentRun is one deployment on one placement.
type DeploymentRun struct {
	Deployment string  `json:"deployment"`
	MeanMs     float64 `json:"mean_ms"`
	// Inflation is (MeanMs - BaselineMs) / BaselineMs.
	Inflation float64 `json:"inflation"`
	// Model is what the round trips alone predict (no processing), as
	// the paper's §6.3.1 simulation computes it.
	Model float64 `json:"model"`
	// Phases are the PEC dialer's own timings, means over the measured
	// handshakes: where the time beyond the handshake went.
	Phases *Phases `json:"phases,omitempty"`
	// Client-server only, of the measured handshakes: how many the
	// server forwarded its chain for (the listener's count), and how
	// many were proved on the server's submission alone, the client's
	// own after the server grace not needed.
	ServerForwards int `json:"server_forwards,omitempty"`
	ProvedOnServer int `json:"proved_on_server,omitempty"`
}

// Phases are means of pec.Timings in milliseconds.
type Phases struct {
	CertificateMs  float64 `json:"certificate_ms"`
	HandshakeMs    float64 `json:"handshake_ms"`
	LastProofMs    float64 `json:"last_proof_ms"`
	VerificationMs float64 `json:"verification_ms"`
	TotalMs        float64 `json:"total_ms"`
}

func (p *Phases) add(t pec.Timings) {
	p.CertificateMs += ms(t.Certificate)
	p.HandshakeMs += ms(t.Handshake)
	p.LastProofMs += ms(t.LastProof)
	p.VerificationMs += ms(t.Verification)
	p.TotalMs += ms(t.Total)
}

func (p *Phases) div(n int) {
	f := float64(n)
	p.CertificateMs, p.HandshakeMs, p.LastProofMs, p.VerificationMs, p.TotalMs = p.CertificateMs/f, p.HandshakeMs/f, p.LastProofMs/f, p.VerificationMs/f, p.TotalMs/f
}

// StudySummary is the distribution of one deployment's inflation over the
// placements of one footprint, selection and TLS version.
type StudySummary struct {
	Footprint  string  `json:"footprint"`
	Selection  string  `json:"selection"`
	TLS        string  `json:"tls"`
	Deployment string  `json:"deployment"`
	N          int     `json:"n"`
	Under1     float64 `json:"under_1pct"`
	Under2     float64 `json:"under_2pct"`
	Mean       float64 `json:"mean"`
	Median     float64 `json:"median"`
	P90        float64 `json:"p90"`
	// The same from the round trips alone.
	ModelUnder1 float64 `json:"model_under_1pct"`
	ModelUnder2 float64 `json:"model_under_2pct"`
	ModelMean   float64 `json:"model_mean"`

	inflation []float64 // for the plot
}

// triple is a placement on the matrix: client, server, cloud (-1: the
// client's point of presence).
type triple struct {
	footprint, selection  string
	client, server, cloud int
}

// choosePlacements draws the placements without repeats.
func choosePlacements(m *RTTMatrix, cfg *StudyConfig) []triple {
	rng := rand.New(rand.NewPCG(cfg.Seed, 10))
	n := len(m.Regions)
	var out []triple
	var all []triple
	for c := range n {
		for s := range n {
			for k := range n {
				if c != s && s != k && c != k {
					all = append(all, triple{FootprintRegions, SelectRandom, c, s, k})
				}
			}
		}
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	out = append(out, all[:cfg.Random]...)
	pairs := func(footprint string, count int) {
		var ps []triple
		for c := range n {
			for s := range n {
				if c != s {
					k := -1
					if footprint == FootprintRegions {
						// Three distinct VMs, as the paper's "3 out of
						// the 14": the nearest region other than the
						// client's own and the server's.
						k = m.Nearest(c, s)
					}
					ps = append(ps, triple{footprint, SelectNearest, c, s, k})
				}
			}
		}
		rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		out = append(out, ps[:count]...)
	}
	pairs(FootprintRegions, cfg.Nearest)
	pairs(FootprintPoP, cfg.Footprint)
	return out
}

// rtts returns t's client–server, client–cloud and server–cloud round
// trips at real scale. The large footprint's PoP is in the client's metro,
// so the server reaches it over the client–server distance.
func (t triple) rtts(m *RTTMatrix, pop time.Duration) (cs, cc, sc time.Duration) {
	cs = m.RTT(t.client, t.server)
	if t.cloud < 0 {
		return cs, pop, cs
	}
	return cs, m.RTT(t.client, t.cloud), m.RTT(t.server, t.cloud)
}

// ModelInflation is the inflation the round trips alone predict for a
// deployment: the time at which the proofs reach the client against the
// time at which the handshake lets it send data, both from the
// ClientHello (the TCP handshake is not counted, as the delay proxies do
// not delay it). TLS 1.3 is done in one client–server round trip, TLS 1.2
// in two; the server's certificate reaches the client after one. A client
// forwards it then, so its proofs arrive a client–cloud round trip later;
// a server forwards its chain when the ClientHello arrives (half a round
// trip in), and the proofs travel server → cloud → client; pkie's
// client-server client also submits the chain itself when the server's
// proofs are later than ServerGrace(cc) after the certificate, so its
// proofs come by whichever path is first.
func ModelInflation(deployment string, version uint16, cs, cc, sc time.Duration) float64 {
	rs := cs.Seconds()
	base := rs
	if version == tls.VersionTLS12 {
		base = 2 * rs
	}
	var ready float64
	switch deployment {
	case DeployClientOnly:
		ready = rs + cc.Seconds()
	case DeployClientServer:
		ready = min((rs+sc.Seconds()+cc.Seconds())/2, rs+ServerGrace(cc, 1).Seconds()+cc.Seconds())
	}
	if base <= 0 {
		return 0
	}
	return max(0, ready-base) / base
}

// ServerGrace is pec.Dialer's default server grace for a client whose
// cloud is cc away (one and a half round trips, within 10–250 ms), with
// its bounds divided by scale as the study divides the round trips.
func ServerGrace(cc time.Duration, scale float64) time.Duration {
	lo, hi := scaled(10*time.Millisecond, scale), scaled(250*time.Millisecond, scale)
	return min(max(cc+cc/2, lo), hi)
}

func versionName(v uint16) string {
	if v == tls.VersionTLS12 {
		return "1.2"
	}
	return "1.3"
}

// rig is one placement's emulated network: the site behind a delay proxy at
// the client–server round trip and a PEC client registered with the cloud
// through a UDP delay proxy at the client–cloud round trip, both scaled.
type rig struct {
	w     *world
	site  *testbed.Site
	cloud *testbed.Cloud
	// Scaled round trips.
	serverRTT, cloudRTT, serverCloudRTT time.Duration
	siteAddr                            string
	// cloudAddr is the client's point of presence (the UDP proxy); grace
	// the client-server dialer's server grace.
	cloudAddr string
	grace     time.Duration
	client    *pec.Client
}

// deployment is one way of making a connection, timed to the moment the
// application may use it.
type deployment struct {
	name string
	// dialer prepares the deployment on a placement's rig and returns a
	// function making one connection and returning the PEC dialer's
	// timings of it; cleanup is called after the placement.
	dialer func(ctx context.Context, r *rig, version uint16) (dial dialFunc, cleanup func(), err error)
}

// dialFunc makes one connection and returns when the application may use
// it, with what the PEC dialer and server saw of it (nil for plain TLS).
type dialFunc func(context.Context) (*dialInfo, error)

type dialInfo struct {
	timings pec.Timings
	// forwarded: the PEC server sent its chain to the cloud for this
	// connection; onServer: the proofs came without the client
	// submitting.
	forwarded, onServer bool
}

// deployments are the PEC deployments the study measures, and the ones it
// cannot, with the reason.
func deployments() ([]deployment, map[string]string) {
	return []deployment{{DeployClientOnly, clientOnlyDialer}, {DeployClientServer, clientServerDialer}}, nil
}

func baseTLS(w *world, version uint16) *tls.Config {
	// No resumption: every handshake is a full one, proved afresh.
	return &tls.Config{RootCAs: w.root.Pool(), ServerName: siteName, SessionTicketsDisabled: true, MinVersion: version, MaxVersion: version}
}

func plainDialer(r *rig, version uint16) dialFunc {
	return func(ctx context.Context) (*dialInfo, error) {
		td := tls.Dialer{Config: baseTLS(r.w, version)}
		conn, err := td.DialContext(ctx, "tcp", r.siteAddr)
		if err != nil {
			return nil, fmt.Errorf("pecbench: TLS %s handshake: %w", versionName(version), err)
		}
		defer conn.Close()
		if v := conn.(*tls.Conn).ConnectionState().Version; v != version {
			return nil, fmt.Errorf("pecbench: negotiated TLS %#x, not %s", v, versionName(version))
		}
		return nil, nil
	}
}

func clientOnlyDialer(_ context.Context, r *rig, version uint16) (dialFunc, func(), error) {
	addr := r.siteAddr
	d := &pec.Dialer{Mode: pec.ModeClientOnly, Cloud: r.client, Verifiers: r.w.verifiers, TLSConfig: baseTLS(r.w, version), Resumption: pec.ResumeFresh,
		NetDial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, network, addr)
		}}
	return pecDial(d, DeployClientOnly, version, nil), func() {}, nil
}

// pecDial makes one connection through d and checks what it negotiated;
// forwards, if set, is the PEC server's count of chains forwarded.
func pecDial(d *pec.Dialer, name string, version uint16, forwards func() uint64) dialFunc {
	return func(ctx context.Context) (*dialInfo, error) {
		var before uint64
		if forwards != nil {
			before = forwards()
		}
		c, err := d.Dial(ctx, "tcp", net.JoinHostPort(siteName, "443"))
		if err != nil {
			return nil, fmt.Errorf("pecbench: %s PEC over TLS %s: %w", name, versionName(version), err)
		}
		defer c.Close()
		if v := c.ConnectionState().Version; v != version {
			return nil, fmt.Errorf("pecbench: negotiated TLS %#x, not %s", v, versionName(version))
		}
		ev := c.Evidence()
		if ev.Reused || !ev.Extension != (d.Mode == pec.ModeClientOnly) {
			return nil, fmt.Errorf("pecbench: %s dial: evidence %+v is not this deployment's", name, ev)
		}
		info := &dialInfo{timings: c.Timings(), onServer: ev.ServerForwarded}
		if forwards != nil {
			info.forwarded = forwards() > before
		}
		return info, nil
	}
}

// clientServerDialer starts a PEC server for the placement: the site's
// certificate served by a stock net/http server behind pec.Listener, which
// forwards the chain to the cloud the client names (its point of presence:
// the rig's UDP proxy, whose flows after the client's own cross the
// server–cloud distance), reached through its own TCP delay proxy at the
// client–server round trip. The client's server grace is the Dialer's
// default, scaled with the round trips.
func clientServerDialer(ctx context.Context, r *rig, version uint16) (dialFunc, func(), error) {
	pin, err := r.cloud.Bundle.Pin()
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("pecbench: PEC server: %w", err)
	}
	srvTLS := &tls.Config{Certificates: []tls.Certificate{r.w.leaf.TLSCertificate()}}
	// One client address makes every connection of the study: lift the
	// per-client share, which is there to refuse such a client.
	pl, err := pec.NewListener(ln, pec.ServerConfig{TLSConfig: srvTLS, Port: 443,
		Clouds:        []pec.AllowedCloud{{Addr: pec.Addr{Transport: pecwire.QUIC, HostPort: r.cloudAddr}, Pin: pin, Pinned: true}},
		PerClientRate: 1e6, PerClientBurst: 1 << 20, ForwardRate: 1e6, ForwardBurst: 1 << 20})
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	srv := &http.Server{TLSConfig: srvTLS, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, siteName) })}
	go srv.ServeTLS(pl, "", "")
	sp, err := testbed.StartDelayProxy(ln.Addr().String(), r.serverRTT)
	if err != nil {
		srv.Close()
		pl.Close()
		return nil, nil, err
	}
	cleanup := func() {
		sp.Close()
		srv.Close()
		pl.Close()
	}
	addr := sp.Addr.String()
	base := baseTLS(r.w, version)
	d := &pec.Dialer{Mode: pec.ModeClientServer, ServerGrace: r.grace, Cloud: r.client, Verifiers: r.w.verifiers, TLSConfig: base, Resumption: pec.ResumeFresh,
		NetDial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, network, addr)
		}}
	// Forwards the listener decided to make: counted before the
	// ClientHello reaches the TLS stack, so before the dial can return
	// (Forwarded itself is counted when the sending is done).
	forwards := func() uint64 {
		st := pl.Stats()
		return st.WithExtension - st.NotAllowed - st.RateLimited - st.NoChain
	}
	return pecDial(d, DeployClientServer, version, forwards), cleanup, nil
}

// RunStudy runs the latency study.
func RunStudy(ctx context.Context, cfg StudyConfig) (*Study, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	cfg.defaults()
	logf := func(format string, a ...any) { fmt.Fprintf(cfg.Progress, format+"\n", a...) }
	m, err := NewRTTMatrix(PaperRegions, cfg.FibreFactor)
	if err != nil {
		return nil, err
	}
	deps, notMeasured := deployments()
	st := &Study{
		Machine: Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0)},
		Started: time.Now().UTC(), Scale: cfg.Scale, FibreFactor: cfg.FibreFactor, PoPRTTms: ms(cfg.PoPRTT), Reps: cfg.Reps,
		Matrix: m, NotMeasured: notMeasured,
	}
	for _, d := range deps {
		st.Deployments = append(st.Deployments, d.name)
	}
	logf("building the world: CA, log, revocation authority, a %d-byte chain", PaperFlightBytes)
	w, err := newWorld(ctx, max(cfg.LogFill, 0), max(cfg.RevokedFill, 0), logf)
	if err != nil {
		return nil, err
	}
	defer w.close()
	site, err := testbed.StartSite(siteName, w.leaf, nil)
	if err != nil {
		return nil, err
	}
	defer site.Close()
	cl, err := w.startCloud(ctx, "pec.bench", benchCloudConfig(4))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ts := choosePlacements(m, &cfg)
	for i, t := range ts {
		ps, err := runPlacement(ctx, &cfg, w, m, site, cl, deps, t)
		if err != nil {
			return nil, fmt.Errorf("placement %d (%s %s, client %s, server %s): %w", i+1, t.footprint, t.selection,
				m.Regions[t.client].Code, m.Regions[t.server].Code, err)
		}
		for _, p := range ps {
			line := fmt.Sprintf("placements: %d/%d %s %s client %s server %s cloud %s: TLS %s %.1f ms", i+1, len(ts), p.Footprint, p.Selection,
				p.Client, p.Server, p.Cloud, p.TLS, p.BaselineMs)
			for _, r := range p.Runs {
				line += fmt.Sprintf(", %s %+.1f%% (model %+.1f%%)", r.Deployment, 100*r.Inflation, 100*r.Model)
			}
			logf("%s", line)
		}
		st.Placements = append(st.Placements, ps...)
	}
	st.Summaries = summarize(st.Placements)
	st.Seconds = time.Since(st.Started).Seconds()
	return st, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func scaled(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d) / scale)
}

// runPlacement measures one placement over every TLS version.
func runPlacement(ctx context.Context, cfg *StudyConfig, w *world, m *RTTMatrix, site *testbed.Site, cl *testbed.Cloud, deps []deployment, t triple) (_ []Placement, err error) {
	cs, cc, sc := t.rtts(m, cfg.PoPRTT)
	r := &rig{w: w, site: site, cloud: cl, serverRTT: scaled(cs, cfg.Scale), cloudRTT: scaled(cc, cfg.Scale), serverCloudRTT: scaled(sc, cfg.Scale)}
	sp, err := testbed.StartDelayProxy(site.Addr.String(), r.serverRTT)
	if err != nil {
		return nil, err
	}
	defer sp.Close()
	r.siteAddr = sp.Addr.String()
	// The client registers first: its flow crosses the client–cloud
	// distance, every later one (the PEC server's) the server–cloud one.
	cp, err := testbed.StartUDPProxy(cl.QUIC, testbed.UDPProxyConfig{FlowDelay: func(_ netip.AddrPort, rank int) time.Duration {
		if rank == 0 {
			return r.cloudRTT / 2
		}
		return r.serverCloudRTT / 2
	}})
	if err != nil {
		return nil, err
	}
	defer cp.Close()
	r.cloudAddr, r.grace = cp.Addr.String(), ServerGrace(r.cloudRTT, cfg.Scale)
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	r.client, err = pec.Dial(dctx, pec.ClientConfig{Clouds: []*pec.Bundle{quicOnly(cl, "pec.bench", cp.Addr.String())}, Transport: pec.TransportQUIC})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("registering with the cloud: %w", err)
	}
	defer r.client.Close()

	cloud := "pop"
	if t.cloud >= 0 {
		cloud = m.Regions[t.cloud].Code
	}
	var out []Placement
	for _, v := range cfg.Versions {
		p := Placement{Footprint: t.footprint, Selection: t.selection, Client: m.Regions[t.client].Code, Server: m.Regions[t.server].Code, Cloud: cloud,
			ServerRTTms: ms(cs), CloudRTTms: ms(cc), ServerCloudRTTms: ms(sc), TLS: versionName(v)}
		dials := []dialFunc{plainDialer(r, v)}
		for _, d := range deps {
			dial, cleanup, err := d.dialer(ctx, r, v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.name, err)
			}
			defer cleanup()
			dials = append(dials, dial)
		}
		sums := make([]time.Duration, len(dials))
		phases := make([]*Phases, len(dials))
		forwards, onServer := make([]int, len(dials)), make([]int, len(dials))
		// One unmeasured round first (first-use costs: the dialer's
		// set-up, the verifiers' head caches), then Reps measured
		// ones, the modes interleaved so that the machine's load falls
		// on all alike.
		for rep := range cfg.Reps + 1 {
			for i, dial := range dials {
				hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				info, err := dial(hctx)
				d := time.Since(t0)
				cancel()
				if err != nil {
					return nil, err
				}
				if rep > 0 {
					sums[i] += d
					if info != nil {
						if phases[i] == nil {
							phases[i] = &Phases{}
						}
						phases[i].add(info.timings)
						if info.forwarded {
							forwards[i]++
						}
						if info.onServer {
							onServer[i]++
						}
					}
				}
			}
		}
		mean := func(i int) float64 { return ms(sums[i]) / float64(cfg.Reps) }
		p.BaselineMs = mean(0)
		for i, d := range deps {
			run := DeploymentRun{Deployment: d.name, MeanMs: mean(i + 1), Model: ModelInflation(d.name, v, cs, cc, sc), Phases: phases[i+1],
				ServerForwards: forwards[i+1], ProvedOnServer: onServer[i+1]}
			if run.Phases != nil {
				run.Phases.div(cfg.Reps)
			}
			if p.BaselineMs > 0 {
				run.Inflation = (run.MeanMs - p.BaselineMs) / p.BaselineMs
			}
			p.Runs = append(p.Runs, run)
		}
		out = append(out, p)
	}
	return out, nil
}

// summarize groups the placements by footprint, selection, TLS version and
// deployment.
func summarize(ps []Placement) []StudySummary {
	type key struct{ f, s, v, d string }
	idx := map[key]int{}
	var out []StudySummary
	var models [][]float64
	for _, p := range ps {
		for _, r := range p.Runs {
			k := key{p.Footprint, p.Selection, p.TLS, r.Deployment}
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, StudySummary{Footprint: k.f, Selection: k.s, TLS: k.v, Deployment: k.d})
				models = append(models, nil)
			}
			out[i].inflation = append(out[i].inflation, r.Inflation)
			models[i] = append(models[i], r.Model)
		}
	}
	for i := range out {
		s := &out[i]
		s.N = len(s.inflation)
		s.Under1, s.Under2, s.Mean = shareBelow(s.inflation, 0.01), shareBelow(s.inflation, 0.02), meanOf(s.inflation)
		sorted := slices.Clone(s.inflation)
		slices.Sort(sorted)
		s.Median, s.P90 = quantileOf(sorted, 0.5), quantileOf(sorted, 0.9)
		s.ModelUnder1, s.ModelUnder2, s.ModelMean = shareBelow(models[i], 0.01), shareBelow(models[i], 0.02), meanOf(models[i])
	}
	return out
}

func shareBelow(xs []float64, limit float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	n := 0
	for _, x := range xs {
		if x < limit {
			n++
		}
	}
	return float64(n) / float64(len(xs))
}

func meanOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// quantileOf is the nearest-rank quantile of sorted values.
func quantileOf(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Summary returns the summary for a footprint, selection, version and
// deployment, or nil.
func (s *Study) Summary(footprint, selection, version, deployment string) *StudySummary {
	for i := range s.Summaries {
		x := &s.Summaries[i]
		if x.Footprint == footprint && x.Selection == selection && x.TLS == version && x.Deployment == deployment {
			return x
		}
	}
	return nil
}
