package gen

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Options shape a synthetic trace. DefaultOptions is the hour of campus
// HTTPS traffic that Forced Perspectives (IMC 2014, §3) replayed; each field
// says where its default comes from, and docs/replay.md ("Synthetic
// workloads") tabulates them.
type Options struct {
	// Start is the trace's first instant. Default Monday 21 April 2013,
	// 12:00 US Central time, when the paper's capture began (§3.1).
	Start time.Time
	// Duration is the trace's length; flow starts are spread over
	// [Start, Start+Duration). Default one hour (§3.1).
	Duration time.Duration
	// Flows is how many TCP flows to port 443 the trace holds. Default
	// 3,922,967 (§3.1).
	Flows int64
	// Seed makes the trace: the same Options give the same flows.
	Seed uint64

	// Clients is the number of distinct client addresses. Default 20,000,
	// an assumption (the paper gives no count: its traffic is a whole
	// university's), chosen with NewHost so that the per-client cache
	// leaves the paper's share of requests.
	Clients int
	// ClientSigma is the σ of the lognormal spread of client activity (a
	// few clients make many of the flows). Default 1.2, an assumption.
	ClientSigma float64
	// NewHost (θ) and NewHostDiscount (α) say how often a client's flow
	// goes to a host it has not yet visited: after n flows of which m
	// opened a new (client, host) slot, the next opens one with
	// probability (θ + α·m)/(θ + n), a Pitman–Yor process, so a client's
	// set of hosts grows fast at first and slowly later. Defaults chosen
	// so that 26.8% of the named flows are a client's first to their host
	// (574,078 of 2,139,632, §3.3).
	NewHost, NewHostDiscount float64
	// RevisitSkew shapes which of its hosts a client goes back to: slot
	// ⌊m·U^RevisitSkew⌋ of its m, so values above 1 favour the hosts it
	// visited first. Default 2, an assumption.
	RevisitSkew float64

	// Providers are the classes of server names, with their share of the
	// traffic. The resolvable ones' shares add up to the resolvable share
	// of the flows (54%, §3.1).
	Providers []Provider
	// DeadFromRank spares a provider's most popular hosts from being
	// dead: only hosts of popularity rank DeadFromRank or worse (0 is the
	// most popular) may be. Default 20, an assumption: the paper's dead
	// targets were cloud VMs and stale names (§3.3), not popular sites.
	DeadFromRank int
	// DeadUnanswered makes every flow to a dead host a connection attempt
	// that was never answered (SYNs out, nothing back), so that a trace
	// file says which hosts are dead and `pkie replay synth` marks them,
	// the way it marks a real trace's. The paper's dead targets did
	// answer during the capture and had died by the replay (§3.3), which a
	// trace file cannot say. Default true; live flows carry more bytes to
	// keep each provider's share of the traffic and the mean.
	DeadUnanswered bool

	// MeanBytes is the mean of a flow's bytes, both ways: 2.77 TB over
	// 3,922,967 flows ≈ 706,098 bytes (§3.1, §3.5).
	MeanBytes float64
	// BytesSigma is the σ of the lognormal of a flow's bytes. Default 2,
	// an assumption (heavy-tailed: median ≈ MeanBytes/7.4).
	BytesSigma float64
	// OutShare is the mean share of a flow's bytes sent by the client.
	// Default 0.1, an assumption (HTTPS is mostly downloads).
	OutShare float64
	// DurationMedian and DurationSigma are the lognormal of a flow's
	// duration. Defaults 3 s and 1.5, an assumption (the paper gives no
	// distribution).
	DurationMedian time.Duration
	DurationSigma  float64

	// NoSNI leaves flows without a server name, as the paper's netflow
	// had: then only the resolvable share can be named, by address.
	NoSNI bool
}

// Provider is a class of server names: a content network, a service, or
// the rest of the web.
type Provider struct {
	// Name identifies the provider ("akamai", "facebook", …).
	Name string
	// Share is the provider's share of the flows and, in expectation, of
	// the bytes.
	Share float64
	// Resolvable says the provider's addresses have PTR records naming
	// their host; the others are request-routed content-network addresses
	// without one (§3.1).
	Resolvable bool
	// Hosts is how many distinct names the provider has; their popularity
	// is Zipf with exponent Zipf.
	Hosts int
	Zipf  float64
	// Addrs is how many addresses each name is served from; request
	// routing gives a client one of them. A resolvable provider has one
	// per name (a PTR names one host).
	Addrs int
	// Dead is the probability that one of its hosts (past DeadFromRank)
	// no longer serves TLS.
	Dead float64
	// Style is how its names look.
	Style NameStyle
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
		NewHost:         5.3,
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
// host counts are assumptions, the counts chosen so that the trace
// reaches about 38,700 live hosts (Table 2).
func DefaultProviders() []Provider {
	return []Provider{
		{Name: "akamai", Share: 0.06, Resolvable: true, Hosts: 4000, Zipf: 0.9, Addrs: 1, Dead: 0.38, Style: StyleAkamaiPTR},
		{Name: "aws", Share: 0.09, Resolvable: true, Hosts: 12000, Zipf: 0.8, Addrs: 1, Dead: 0.38, Style: StyleEC2},
		{Name: "facebook", Share: 0.14, Resolvable: true, Hosts: 400, Zipf: 1.0, Addrs: 1, Style: StyleFacebook},
		{Name: "twitter", Share: 0.04, Resolvable: true, Hosts: 150, Zipf: 1.0, Addrs: 1, Style: StyleTwitter},
		{Name: "spotify", Share: 0.002, Resolvable: true, Hosts: 40, Zipf: 1.0, Addrs: 1, Style: StyleSpotify},
		{Name: "web", Share: 0.208, Resolvable: true, Hosts: 76000, Zipf: 0.9, Addrs: 1, Dead: 0.37, Style: StyleSite},
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
)

func (o Options) check() error {
	switch {
	case o.Flows < 0:
		return errors.New("gen: negative Flows")
	case o.Duration <= 0:
		return errors.New("gen: Duration must be positive")
	case o.Clients < 1 || o.Clients > maxClients:
		return fmt.Errorf("gen: Clients must be 1 to %d", maxClients)
	case o.ClientSigma < 0 || o.ClientSigma > 5:
		return errors.New("gen: ClientSigma must be 0 to 5")
	case o.NewHost <= 0 || o.NewHostDiscount < 0 || o.NewHostDiscount >= 1:
		return errors.New("gen: want NewHost > 0 and 0 <= NewHostDiscount < 1")
	case o.RevisitSkew <= 0:
		return errors.New("gen: RevisitSkew must be positive")
	case len(o.Providers) == 0:
		return errors.New("gen: no Providers")
	case o.DeadFromRank < 0:
		return errors.New("gen: negative DeadFromRank")
	case o.MeanBytes < 0 || o.BytesSigma < 0 || o.BytesSigma > 5:
		return errors.New("gen: want MeanBytes >= 0 and 0 <= BytesSigma <= 5")
	case o.OutShare < 0 || o.OutShare > 1:
		return errors.New("gen: OutShare must be 0 to 1")
	case o.DurationMedian < 0 || o.DurationSigma < 0 || o.DurationSigma > 5:
		return errors.New("gen: want DurationMedian >= 0 and 0 <= DurationSigma <= 5")
	}
	var share float64
	addrs := 0
	for _, p := range o.Providers {
		switch {
		case p.Name == "":
			return errors.New("gen: a provider without a Name")
		case p.Share < 0 || math.IsNaN(p.Share):
			return fmt.Errorf("gen: provider %s: negative Share", p.Name)
		case p.Hosts < 1:
			return fmt.Errorf("gen: provider %s: want Hosts >= 1", p.Name)
		case p.Zipf < 0 || p.Zipf > 5:
			return fmt.Errorf("gen: provider %s: Zipf must be 0 to 5", p.Name)
		case p.Addrs < 1 || p.Resolvable && p.Addrs != 1:
			return fmt.Errorf("gen: provider %s: want Addrs >= 1, and 1 when Resolvable", p.Name)
		case p.Dead < 0 || p.Dead > 1:
			return fmt.Errorf("gen: provider %s: Dead must be 0 to 1", p.Name)
		case p.Style < StyleSite || p.Style > StyleCDN:
			return fmt.Errorf("gen: provider %s: unknown Style", p.Name)
		}
		share += p.Share
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
