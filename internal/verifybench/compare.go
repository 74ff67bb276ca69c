package verifybench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Comparison sets the back ends side by side over all the sites, as the
// Servo experiment summed its table up ("openssl was fastest for 11
// sites" at the verify call, "5/12" at connecting).
type Comparison struct {
	// Fastest counts, per criterion, the sites at which each back end
	// was the fastest: "verify" (the verify call's mean, go-parallel's
	// parallel phase included), "total" (all phases' mean) and "connect"
	// (connection p50).
	Fastest map[string]map[string]int `json:"fastest"`
	// Backends are each back end's figures averaged over the sites.
	Backends []BackendComparison `json:"backends"`
	// ServoFastest is the Servo experiment's own count, per criterion
	// ("connect", "total"), of the sites at which each of its methods
	// was the fastest, out of twelve (hackernews left out).
	ServoFastest map[string]map[string]int `json:"servo_fastest,omitempty"`
}

// servoFastest is the experiment's summary: "For total connection time,
// openssl was fastest for 5/12 (excluding hackernews) sites, rustlsserial
// was fastest for 4, and rustlsparallel for the remaining 3. For overall
// verification time, openssl was fastest for 11 sites, and rustlsparallel
// was fastest on washingtonpost.com."
func servoFastest() map[string]map[string]int {
	return map[string]map[string]int{
		"connect": {"openssl": 5, "rustls serial": 4, "rustls parallel": 3},
		"total":   {"openssl": 11, "rustls serial": 0, "rustls parallel": 1},
	}
}

// BackendComparison is one back end's figures, each the mean over the
// sites of the site's figure.
type BackendComparison struct {
	Backend string `json:"backend"`
	Sites   int    `json:"sites"`
	// Roots, Verify and Total are phase means; RootsShare is Roots over
	// Total.
	Roots      time.Duration `json:"roots_ns"`
	Verify     time.Duration `json:"verify_ns"`
	Total      time.Duration `json:"total_ns"`
	RootsShare float64       `json:"roots_share"`
	// Connect is the connection p50 and OverNone what it adds to the
	// connection without verification; VerifyShare is the whole
	// verification's share of the connection.
	Connect     time.Duration `json:"connect_ns"`
	OverNone    time.Duration `json:"over_none_ns"`
	VerifyShare float64       `json:"verify_share"`
}

// verifyCall is the experiment's "verify call": path building and
// signatures, go-parallel's concurrent checks included.
func verifyCall(m Method) time.Duration {
	d := m.Phases.Verify.Mean
	if m.Phases.Parallel != nil {
		d += m.Phases.Parallel.Mean
	}
	return d
}

func (r *Report) compare() {
	if len(r.Sites) == 0 {
		return
	}
	c := &Comparison{Fastest: map[string]map[string]int{"verify": {}, "total": {}, "connect": {}}}
	for _, b := range r.Backends {
		for _, k := range []string{"verify", "total", "connect"} {
			c.Fastest[k][b.Name] = 0
		}
	}
	sums := map[string]*BackendComparison{}
	for _, b := range r.Backends {
		sums[b.Name] = &BackendComparison{Backend: b.Name}
	}
	for _, s := range r.Sites {
		best := map[string]string{}
		bestD := map[string]time.Duration{}
		for _, m := range s.Methods {
			if m.Phases.Total.N == 0 || m.Connect == nil || m.Connect.N == 0 {
				continue
			}
			for k, d := range map[string]time.Duration{"verify": verifyCall(m), "total": m.Phases.Total.Mean, "connect": m.Connect.P50} {
				if best[k] == "" || d < bestD[k] {
					best[k], bestD[k] = m.Backend, d
				}
			}
			b := sums[m.Backend]
			b.Sites++
			b.Roots += m.Phases.Roots.Mean
			b.Verify += verifyCall(m)
			b.Total += m.Phases.Total.Mean
			b.Connect += m.Connect.P50
			b.OverNone += m.Connect.P50 - s.Connect.P50
		}
		for k, name := range best {
			c.Fastest[k][name]++
		}
	}
	for _, b := range r.Backends {
		s := sums[b.Name]
		if s.Sites > 0 {
			n := time.Duration(s.Sites)
			s.Roots, s.Verify, s.Total, s.Connect, s.OverNone = s.Roots/n, s.Verify/n, s.Total/n, s.Connect/n, s.OverNone/n
			if s.Total > 0 {
				s.RootsShare = float64(s.Roots) / float64(s.Total)
			}
			if s.Connect > 0 {
				s.VerifyShare = float64(s.Total) / float64(s.Connect)
			}
		}
		c.Backends = append(c.Backends, *s)
	}
	r.Comparison = c
}

func (c *Comparison) writeText(w io.Writer, nSites int) {
	fmt.Fprintf(w, "\nOver the %d sites (ms, means over the sites; fastest = sites at which the back end was fastest)\n", nSites)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "back end\troots\tverify call\ttotal\troots/total\tconnection p50\tover none\ttotal/connection\tfastest: verify\ttotal\tconnect")
	for _, b := range c.Backends {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f%%\t%s\t%s\t%.1f%%\t%d\t%d\t%d\n", b.Backend, msStr(b.Roots), msStr(b.Verify), msStr(b.Total),
			100*b.RootsShare, msStr(b.Connect), msStr(b.OverNone), 100*b.VerifyShare,
			c.Fastest["verify"][b.Backend], c.Fastest["total"][b.Backend], c.Fastest["connect"][b.Backend])
	}
	tw.Flush()
	if f := c.ServoFastest; f != nil {
		fmt.Fprintf(w, "Servo experiment, of 12 sites: fastest total verification openssl %d, rustls serial %d, rustls parallel %d;"+
			" fastest connection openssl %d, rustls serial %d, rustls parallel %d\n",
			f["total"]["openssl"], f["total"]["rustls serial"], f["total"]["rustls parallel"],
			f["connect"]["openssl"], f["connect"]["rustls serial"], f["connect"]["rustls parallel"])
	}
}
