package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Options shape a synthetic trace. DefaultOptions is the hour of campus
// HTTPS traffic that Forced Perspectives (IMC 2014, §3) replayed; each field
// says where its default comes from, and docs/measurement/replay.md ("Synthetic
// workloads") tabulates them.
type Options struct {
	// Start is the trace's first instant. Default Monday 21 April 2013,
	// 12:00 US Central time, when the paper's capture began (§3.1).
	Start time.Time `json:"start"`
	// Duration is the trace's length; flow starts are spread over
	// [Start, Start+Duration) at a level rate, a Poisson process of
	// Flows/Duration a second conditioned on its count: the paper's
	// Figure 2 shows a roughly level rate with noise. Default one hour
	// (§3.1).
	Duration time.Duration `json:"duration_ns"`
	// Flows is how many TCP flows to port 443 the trace holds. Default
	// 3,922,967 (§3.1).
	Flows int64 `json:"flows"`
	// Seed makes the trace: the same Options give the same flows.
	Seed uint64 `json:"seed"`

	// Clients is the number of distinct client addresses. Default 20,000,
	// an assumption (the paper gives no count: its traffic is a whole
	// university's), chosen with NewHost so that the per-client cache
	// leaves the paper's share of requests.
	Clients int `json:"clients"`
	// ClientSigma is the σ of the lognormal spread of client activity (a
	// few clients make many of the flows). Default 1.2, an assumption.
	ClientSigma float64 `json:"client_sigma"`
	// NewHost (θ) and NewHostDiscount (α) say how often a client's flow
	// goes to a host it has not yet visited: after n flows of which m
	// opened a new (client, host) slot, the next opens one with
	// probability (θ + α·m)/(θ + n), a Pitman–Yor process, so a client's
	// set of hosts grows fast at first and slowly later. Defaults 3.1 and
	// 0.58, chosen with Provider.Dead so that 26.8% of the named flows are
	// requests after the client caches (574,078 of 2,139,632, §3.3): a
	// client's first flow to a live host, and every flow to a dead one,
	// since an unanswered flow fills no cache.
	NewHost         float64 `json:"new_host"`
	NewHostDiscount float64 `json:"new_host_discount"`
	// RevisitSkew shapes which of its hosts a client goes back to: slot
	// ⌊m·U^RevisitSkew⌋ of its m, so values above 1 favour the hosts it
	// visited first. Default 2, an assumption.
	RevisitSkew float64 `json:"revisit_skew"`

	// Providers are the classes of server names, with their share of the
	// traffic. The resolvable ones' shares add up to the resolvable share
	// of the flows (54%, §3.1).
	Providers []Provider `json:"providers"`
	// DeadFromRank spares a provider's most popular hosts from being
	// dead: only hosts of popularity rank DeadFromRank or worse (0 is the
	// most popular) may be. Default 20, an assumption: the paper's dead
	// targets were cloud VMs and stale names (§3.3), not popular sites.
	DeadFromRank int `json:"dead_from_rank"`
	// DeadUnanswered makes every flow to a dead host a connection attempt
	// that was never answered (SYNs out, nothing back), so that a trace
	// file says which hosts are dead and `pkie replay synth` marks them,
	// the way it marks a real trace's. The paper's dead targets did
	// answer during the capture and had died by the replay (§3.3), which a
	// trace file cannot say. Default true; live flows carry more bytes to
	// keep each provider's share of the traffic and the mean.
	DeadUnanswered bool `json:"dead_unanswered"`

	// MeanBytes is the mean of a flow's bytes, both ways: 2.77 TB over
	// 3,922,967 flows ≈ 706,098 bytes (§3.1, §3.5).
	MeanBytes float64 `json:"mean_bytes"`
	// BytesSigma is the σ of the lognormal of a flow's bytes. Default 2,
	// an assumption (heavy-tailed: median ≈ MeanBytes/7.4).
	BytesSigma float64 `json:"bytes_sigma"`
	// OutShare is the mean share of a flow's bytes sent by the client.
	// Default 0.1, an assumption (HTTPS is mostly downloads).
	OutShare float64 `json:"out_share"`
	// DurationMedian and DurationSigma are the lognormal of a flow's
	// duration. Defaults 3 s and 1.5, an assumption (the paper gives no
	// distribution).
	DurationMedian time.Duration `json:"duration_median_ns"`
	DurationSigma  float64       `json:"duration_sigma"`

	// NoSNI leaves flows without a server name, as the paper's netflow
	// had: then only the resolvable share can be named, by address.
	NoSNI bool `json:"no_sni"`
}

// Provider is a class of server names: a content network, a service, or
// the rest of the web.
type Provider struct {
	// Name identifies the provider ("akamai", "facebook", …).
	Name string `json:"name"`
	// Share is the provider's share of the flows and, in expectation, of
	// the bytes.
	Share float64 `json:"share"`
	// Resolvable says the provider's addresses have PTR records naming
	// their host; the others are request-routed content-network addresses
	// without one (§3.1).
	Resolvable bool `json:"resolvable"`
	// Hosts is how many distinct names the provider has; their popularity
	// is Zipf with exponent Zipf.
	Hosts int     `json:"hosts"`
	Zipf  float64 `json:"zipf"`
	// Addrs is how many addresses each name is served from; request
	// routing gives a client one of them. A resolvable provider has one
	// per name (a PTR names one host).
	Addrs int `json:"addrs"`
	// Dead is the probability that one of its hosts (past DeadFromRank)
	// no longer serves TLS. With DeadUnanswered each of a dead host's
	// flows is a request (an unanswered flow fills no client cache), so
	// the default, 0.105 for akamai, aws and web, is chosen for the
	// paper's 116,000 requests to dead hosts (Table 1) counting every flow
	// to one, not a client's first.
	Dead float64 `json:"dead"`
	// Style is how its names look.
	Style NameStyle `json:"style"`
}

// NameStyle is a shape of synthetic server names. Names are valid DNS
// names in lower case, made up but shaped like the provider's real ones.
type NameStyle int

const (
	StyleSite        NameStyle = iota // www.bluefield123.com
	StyleAkamaiPTR                    // a198-18-3-7.deploy.static.akamaitechnologies.com
	StyleEC2                          // ec2-198-18-3-7.compute-1.amazonaws.com
	StyleFacebook                     // scontent-iad3-12.xx.fbcdn.net, edge-star-shv-01-ord1.facebook.com
	StyleTwitter                      // r-198-18-3-7.twttr.com
	StyleSpotify                      // ash2-accesspoint-a12.ap.spotify.com
	StyleAppleAkamai                  // p12-caldav.icloud.com (served as *.apple.com.akadns.net)
	StyleAkamaiEdge                   // e1234.a.akamaiedge.net
	StyleCDN                          // cs123.wpc.edgecastcdn.net
)

var styleNames = [...]string{"site", "akamai-ptr", "ec2", "facebook", "twitter", "spotify", "apple-akamai", "akamai-edge", "cdn"}

// String returns the style's name in options files: "site", "akamai-ptr",
// "ec2", "facebook", "twitter", "spotify", "apple-akamai", "akamai-edge"
// or "cdn".
func (s NameStyle) String() string {
	if s >= 0 && int(s) < len(styleNames) {
		return styleNames[s]
	}
	return fmt.Sprintf("NameStyle(%d)", int(s))
}

// MarshalText writes the style's name.
func (s NameStyle) MarshalText() ([]byte, error) {
	if s < 0 || int(s) >= len(styleNames) {
		return nil, fmt.Errorf("gen: unknown name style %d", int(s))
	}
	return []byte(styleNames[s]), nil
}

// UnmarshalText reads a style's name.
func (s *NameStyle) UnmarshalText(b []byte) error {
	for i, n := range styleNames {
		if string(b) == n {
			*s = NameStyle(i)
			return nil
		}
	}
	return fmt.Errorf("gen: unknown name style %q (want one of %s)", clip(string(b)), strings.Join(styleNames[:], ", "))
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// MaxOptionsFile bounds an options file: the defaults are 2 KB.
const MaxOptionsFile = 1 << 20

// ReadOptions reads an options file: a JSON object with Options' fields
// (their JSON names; durations in nanoseconds), each replacing the
// default's. A "providers" list replaces the default list whole. Unknown
// fields are refused, so that a misspelt one is not silently ignored; so
// are options New would refuse.
func ReadOptions(r io.Reader) (Options, error) {
	o := DefaultOptions()
	b, err := io.ReadAll(io.LimitReader(r, MaxOptionsFile+1))
	if err != nil {
		return o, fmt.Errorf("gen: reading options: %w", err)
	}
	if len(b) > MaxOptionsFile {
		return o, fmt.Errorf("gen: options file over %d bytes", MaxOptionsFile)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("gen: options: %w", err)
	}
	if dec.More() {
		return o, errors.New("gen: options: more than one JSON value")
	}
	if err := o.check(); err != nil {
		return o, err
	}
	return o, nil
}

// PaperFlows and the figures after it are Forced Perspectives' (IMC 2014)
// published counts of its hour of campus HTTPS, which DefaultOptions
// reproduces.
const (
	PaperFlows       = 3922967 // TCP/443 flows in the hour, §3.1
	PaperNamedFlows  = 2139632 // flows whose server had a PTR record, §3.1
	PaperRequests    = 574078  // requests after the per-client cache, §3.3
	PaperMisses      = 38704   // notary cache misses, one per live host, Table 2
	PaperUnavailable = 116000  // 503s, requests to dead hosts, Table 1
	PaperBytes       = 2.77e12 // HTTPS bytes of the hour, §3.5
)

// DefaultOptions returns the paper's hour.
func DefaultOptions() Options {
	return Options{
		Start:           time.Date(2013, 4, 21, 17, 0, 0, 0, time.UTC), // noon CDT
		Duration:        time.Hour,
		Flows:           PaperFlows,
		Seed:            1,
		Clients:         20000,
		ClientSigma:     1.2,
		NewHost:         3.1,
		NewHostDiscount: 0.58,
		RevisitSkew:     2,
		Providers:       DefaultProviders(),
		DeadFromRank:    20,
		DeadUnanswered:  true,
		MeanBytes:       PaperBytes / PaperFlows,
		BytesSigma:      2,
		OutShare:        0.1,
		DurationMedian:  3 * time.Second,
		DurationSigma:   1.5,
	}
}

// DefaultProviders returns the paper's mix (§3.1): Akamai 24% of the
// traffic, Amazon AWS 9%, Facebook 14%, Twitter 4%, Spotify 0.2%; 54% of
// the flows resolvable by reverse DNS, and a third of the unresolvable
// addresses Apple's, served by Akamai. How Akamai splits between its
// resolvable and unresolvable addresses, which providers resolve, and the
// host counts are assumptions, the counts (akamai 2,400, aws 7,200, web
// 45,600) chosen so that the trace reaches about 38,700 live hosts
// (Table 2).
func DefaultProviders() []Provider {
	return []Provider{
		{Name: "akamai", Share: 0.06, Resolvable: true, Hosts: 2400, Zipf: 0.9, Addrs: 1, Dead: 0.105, Style: StyleAkamaiPTR},
		{Name: "aws", Share: 0.09, Resolvable: true, Hosts: 7200, Zipf: 0.8, Addrs: 1, Dead: 0.105, Style: StyleEC2},
		{Name: "facebook", Share: 0.14, Resolvable: true, Hosts: 400, Zipf: 1.0, Addrs: 1, Style: StyleFacebook},
		{Name: "twitter", Share: 0.04, Resolvable: true, Hosts: 150, Zipf: 1.0, Addrs: 1, Style: StyleTwitter},
		{Name: "spotify", Share: 0.002, Resolvable: true, Hosts: 40, Zipf: 1.0, Addrs: 1, Style: StyleSpotify},
		{Name: "web", Share: 0.208, Resolvable: true, Hosts: 45600, Zipf: 0.9, Addrs: 1, Dead: 0.105, Style: StyleSite},
		{Name: "apple-akamai", Share: 0.09, Resolvable: false, Hosts: 1500, Zipf: 1.0, Addrs: 4, Style: StyleAppleAkamai},
		{Name: "akamai-edge", Share: 0.09, Resolvable: false, Hosts: 3000, Zipf: 1.0, Addrs: 2, Style: StyleAkamaiEdge},
		{Name: "cdn", Share: 0.28, Resolvable: false, Hosts: 6000, Zipf: 1.0, Addrs: 1, Style: StyleCDN},
	}
}

// Scaled returns o with its flows and clients multiplied by f: the same
// clients' behaviour in a smaller (or larger) network over the same
// Duration and the same web. The shares of the flows and requests stay
// the paper's; the number of distinct hosts reached grows more slowly than
// f, as it would. Counts stay at least 1.
func (o Options) Scaled(f float64) Options {
	o.Flows = int64(max(1, math.Round(float64(o.Flows)*f)))
	o.Clients = int(max(1, math.Round(float64(o.Clients)*f)))
	return o
}

// Address space: server addresses come from 198.18.0.0/15, the range set
// aside for benchmarking (RFC 2544), then 100.64.0.0/10 (RFC 6598): neither
// is anyone's server, so a trace cannot be mistaken for real traffic to
// real hosts, and neither is a private range that a notary's address
// checks would refuse before the world maps names to loopback. Clients are
// 10.0.0.0/8, as an anonymised campus's would be.
const (
	maxClients = 1<<24 - 2
	maxAddrs   = 1<<17 + 1<<22
	// maxProviders and maxHostAddrs bound what a host record counts.
	maxProviders = 1000
	maxHostAddrs = 64
)

func (o Options) check() error {
	switch {
	case o.Flows < 0:
		return errors.New("gen: negative Flows")
	case o.Start.Year() < 1970 || o.Start.Year() > 9999:
		// Trace formats count time from 1970 (Zeek's ts, nfdump's
		// csv-fast); a trace before then would not read back.
		return errors.New("gen: Start must be in the years 1970 to 9999")
	case o.Duration <= 0:
		return errors.New("gen: Duration must be positive")
	case o.Clients < 1 || o.Clients > maxClients:
		return fmt.Errorf("gen: Clients must be 1 to %d", maxClients)
	case !(o.ClientSigma >= 0 && o.ClientSigma <= 5):
		return errors.New("gen: ClientSigma must be 0 to 5")
	case !(o.NewHost > 0 && o.NewHost <= 1e9) || !(o.NewHostDiscount >= 0 && o.NewHostDiscount < 1):
		return errors.New("gen: want 0 < NewHost <= 1e9 and 0 <= NewHostDiscount < 1")
	case !(o.RevisitSkew > 0 && o.RevisitSkew <= 100):
		return errors.New("gen: RevisitSkew must be above 0, at most 100")
	case len(o.Providers) == 0 || len(o.Providers) > maxProviders:
		return fmt.Errorf("gen: want 1 to %d Providers", maxProviders)
	case o.DeadFromRank < 0:
		return errors.New("gen: negative DeadFromRank")
	case !(o.MeanBytes >= 0 && o.MeanBytes <= 1e12) || !(o.BytesSigma >= 0 && o.BytesSigma <= 5):
		return errors.New("gen: want 0 <= MeanBytes <= 1e12 and 0 <= BytesSigma <= 5")
	case !(o.OutShare >= 0 && o.OutShare <= 1):
		return errors.New("gen: OutShare must be 0 to 1")
	case o.DurationMedian < 0 || !(o.DurationSigma >= 0 && o.DurationSigma <= 5):
		return errors.New("gen: want DurationMedian >= 0 and 0 <= DurationSigma <= 5")
	}
	var share float64
	addrs := 0
	names := map[string]bool{}
	for _, p := range o.Providers {
		switch {
		case p.Name == "" || len(p.Name) > 64:
			return errors.New("gen: a provider's Name must be 1 to 64 bytes")
		case !(p.Share >= 0 && p.Share <= 1e6):
			return fmt.Errorf("gen: provider %s: Share must be 0 to 1e6", p.Name)
		case p.Hosts < 1:
			return fmt.Errorf("gen: provider %s: want Hosts >= 1", p.Name)
		case !(p.Zipf >= 0 && p.Zipf <= 5):
			return fmt.Errorf("gen: provider %s: Zipf must be 0 to 5", p.Name)
		case p.Addrs < 1 || p.Addrs > maxHostAddrs || p.Resolvable && p.Addrs != 1:
			return fmt.Errorf("gen: provider %s: want Addrs 1 to %d, and 1 when Resolvable", p.Name, maxHostAddrs)
		case names[p.Name]:
			return fmt.Errorf("gen: two providers named %s", p.Name)
		case !(p.Dead >= 0 && p.Dead <= 1):
			return fmt.Errorf("gen: provider %s: Dead must be 0 to 1", p.Name)
		case p.Style < StyleSite || p.Style > StyleCDN:
			return fmt.Errorf("gen: provider %s: unknown Style", p.Name)
		}
		names[p.Name] = true
		share += p.Share
		if p.Hosts > maxAddrs {
			return fmt.Errorf("gen: more than %d server addresses", maxAddrs)
		}
		addrs += p.Hosts * p.Addrs
		if addrs > maxAddrs {
			return fmt.Errorf("gen: more than %d server addresses", maxAddrs)
		}
	}
	if share <= 0 {
		return errors.New("gen: the providers' shares add up to nothing")
	}
	return nil
}
