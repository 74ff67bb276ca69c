package driver

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/option"
	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/testbed"
)

// Setup is how a replay is set up around Run, as pkie replay run takes it:
// which notaries (local ones probing a synthetic world, or remote ones by
// bundle), their API and connections, and the pace. Validate it, then
// Prepare fills in a Run's Options.
type Setup struct {
	// Local is how many notaries to run in this process (1 to 16), each
	// probing a synthetic world of the schedule's targets; 0 when Bundles
	// name remote notaries instead. Exactly one of the two is given.
	Local   int
	Bundles []string
	// API is the notary API: "convergence" (as the paper's clients) or
	// "v1"; Conns is replay.ConnsReuse or replay.ConnsFresh.
	API, Conns string
	// Speedup, Timeout, From, Until and MaxInFlight are Options'; here
	// Speedup and MaxInFlight must be given (no zero default).
	Speedup     float64
	Timeout     time.Duration
	From, Until time.Duration
	MaxInFlight int
	// Hosts is how many loopback source addresses (127.0.1.1 …) the
	// schedule's clients are spread over when the notaries are on
	// loopback: 1 to 254.
	Hosts int
	// For local notaries: the probe timeout; the probes in flight (at
	// most 100000), the probes queued and the requests handled at once (at
	// most 1000000), 0 each for the notary's default; and what the world's
	// dead targets do, "refuse" (connections refused) or "silent"
	// (accepted, never answered).
	ProbeTimeout                              time.Duration
	NotaryProbes, NotaryQueue, NotaryRequests int
	Dead                                      string
}

func setupErr(fields []string, format string, a ...any) error {
	return option.Errorf("driver", fields, format, a...)
}

// Validate reports the first option that is out of range or does not go
// with the others, as an *option.Error.
func (s *Setup) Validate() error {
	one := func(f string) []string { return []string{f} }
	switch {
	case (s.Local == 0) == (len(s.Bundles) == 0):
		return setupErr([]string{"Local", "Bundles"}, "want Local or one or more Bundles, not both")
	case s.Local < 0 || s.Local > 16:
		return setupErr(one("Local"), "Local must be 1 to 16")
	case s.API != "convergence" && s.API != "v1":
		return setupErr(one("API"), "API %q: want convergence or v1", s.API)
	case !(s.Speedup > 0) || math.IsInf(s.Speedup, 0):
		// The flag parser accepts "NaN" and "Inf", which would make every
		// request due at once (or never) and cannot be written to the
		// record.
		return setupErr(one("Speedup"), "Speedup %v: want a finite number above 0", s.Speedup)
	case s.Timeout <= 0:
		return setupErr(one("Timeout"), "Timeout must be positive")
	case s.From < 0 || s.Until < 0:
		return setupErr([]string{"From", "Until"}, "From and Until must not be negative")
	case s.Until != 0 && s.Until <= s.From:
		return setupErr([]string{"Until", "From"}, "Until %v is not after From %v", s.Until, s.From)
	case s.Hosts < 1 || s.Hosts > 254:
		return setupErr(one("Hosts"), "Hosts must be 1 to 254")
	case s.MaxInFlight < 1:
		return setupErr(one("MaxInFlight"), "MaxInFlight must be positive")
	case s.Dead != "refuse" && s.Dead != "silent" && s.Dead != "":
		return setupErr(one("Dead"), "Dead %q: want refuse or silent", s.Dead)
	case s.Conns != replay.ConnsReuse && s.Conns != replay.ConnsFresh:
		return setupErr(one("Conns"), "Conns %q: want reuse or fresh", s.Conns)
	case s.NotaryProbes < 0 || s.NotaryProbes > 100000, s.NotaryQueue < 0 || s.NotaryQueue > 1000000, s.NotaryRequests < 0 || s.NotaryRequests > 1000000:
		return setupErr([]string{"NotaryProbes", "NotaryQueue", "NotaryRequests"}, "NotaryProbes (at most 100000), NotaryQueue and NotaryRequests (at most 1000000) must be 0 (the default) or positive")
	case s.Local == 0 && (s.NotaryProbes != 0 || s.NotaryQueue != 0 || s.NotaryRequests != 0):
		return setupErr([]string{"NotaryProbes", "NotaryQueue", "NotaryRequests", "Local"}, "NotaryProbes, NotaryQueue and NotaryRequests size a local notary: give Local")
	}
	return nil
}

// Prepare starts what s asks for and fills in o: with Local, the synthetic
// world of targets and the local notaries; else the notaries of Bundles;
// then a Target per notary, the source addresses, the pace and, for local
// notaries, the byte counters and the header's description. warn receives
// what the run goes on without (a source address it cannot bind). The
// returned function stops what Prepare started; call it after Run, also
// on error.
func (s *Setup) Prepare(targets []replay.Target, o *Options, warn func(string)) (stop func(), err error) {
	var closers []func()
	stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	o.Speedup, o.Timeout, o.From, o.Until, o.MaxInFlight = s.Speedup, s.Timeout, s.From, s.Until, s.MaxInFlight
	// Linux routes all of 127.0.0.0/8 to loopback; other systems only the
	// addresses configured.
	sources := LoopbackSources(s.Hosts)
	bindErr := canBind(sources[len(sources)-1])
	nSources := s.Hosts
	if bindErr != nil {
		nSources = 1
	}
	var fps Fingerprints
	var nbs []*consensus.Bundle
	if s.Local > 0 {
		dead := deadHosts(targets)
		world, err := testbed.StartWorld(testbed.WorldOptions{
			Dead:       func(h string) bool { return dead[strings.ToLower(h)] },
			DeadSilent: s.Dead == "silent",
		})
		if err != nil {
			return stop, err
		}
		closers = append(closers, func() { world.Close() })
		fps = func(host string, _ uint16) ([20]byte, [32]byte, bool) {
			s1, s256, err := world.Fingerprint(host)
			return s1, s256, err == nil
		}
		var locals []*Local
		for i := range s.Local {
			name := "local"
			if s.Local > 1 {
				name = fmt.Sprintf("local-%d", i+1)
			}
			l, err := StartLocal(LocalOptions{
				Name: name, Lookup: world.Lookup, ProbeTimeout: s.ProbeTimeout, Sources: nSources, MaxInFlight: s.MaxInFlight,
				Config: notary.Config{MaxProbes: s.NotaryProbes, MaxQueue: s.NotaryQueue, MaxRequests: s.NotaryRequests},
			})
			if err != nil {
				return stop, err
			}
			closers = append(closers, func() { l.Close() })
			locals = append(locals, l)
			nbs = append(nbs, l.Bundle)
		}
		o.NotaryBytesEach = func() []int64 {
			each := make([]int64, len(locals))
			for i, l := range locals {
				each[i] = l.Bytes()
			}
			return each
		}
		o.ProbeBytes = world.ProbeBytes
		c := locals[0].Config
		deadHow := "refusing connections"
		if s.Dead == "silent" {
			deadHow = "silent"
		}
		o.Header.Local = fmt.Sprintf("synthetic world: %d listeners, %d names of which %d dead (%s); %d notaries, SQLite history, probe timeout %v, %s; per source address: %d requests, %d probes, %d connections",
			len(world.Addrs), len(targets), len(dead), deadHow, s.Local, s.ProbeTimeout, localTotals(c), c.MaxRequestsPerClient, c.MaxProbesPerClient, c.Conns.MaxConnsPerClient)
	} else {
		for _, f := range s.Bundles {
			b, err := consensus.ReadBundle(f)
			if err != nil {
				return stop, err
			}
			nbs = append(nbs, b)
		}
	}
	loopback := true
	for _, b := range nbs {
		loopback = loopback && OnLoopback(b)
	}
	if loopback {
		if bindErr != nil {
			warn(fmt.Sprintf("cannot send from %v (%v); every request leaves from one address, so the notaries see one client", sources[len(sources)-1], bindErr))
		} else {
			o.Sources = sources
		}
	}
	// Connections from each source address to each notary: enough for
	// its share of the requests in flight at HTTP/2's 100 streams each,
	// with room for hashing's unevenness.
	conns := max(4, 2*(s.MaxInFlight/max(1, len(o.Sources))/100+1))
	for _, b := range nbs {
		var t interface {
			Target
			Close()
			FreshConnections()
		}
		if s.API == "v1" {
			t, err = NewV1(b, fps, conns)
		} else {
			t, err = NewConvergence(b, fps, conns)
		}
		if err != nil {
			return stop, err
		}
		closers = append(closers, t.Close)
		if s.Conns == replay.ConnsFresh {
			t.FreshConnections()
		}
		o.Targets = append(o.Targets, t)
	}
	return stop, nil
}

// deadHosts returns the hosts (lower case) every target of which is dead:
// the world serves a host on every port or on none.
func deadHosts(targets []replay.Target) map[string]bool {
	live := map[string]bool{}
	dead := map[string]bool{}
	for _, t := range targets {
		h := strings.ToLower(t.Host)
		if t.Dead {
			dead[h] = true
		} else {
			live[h] = true
		}
	}
	for h := range live {
		delete(dead, h)
	}
	return dead
}

// canBind reports whether connections can leave from a.
func canBind(a netip.Addr) error {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: a.AsSlice()})
	if err != nil {
		return err
	}
	return ln.Close()
}

// localTotals says a local notary's totals as configured (zero fields are
// the notary's defaults).
func localTotals(c notary.Config) string {
	n := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	probes := n(c.MaxProbes, 64)
	return fmt.Sprintf("%d probes, %d queued, %d requests in all", probes, n(c.MaxQueue, 4*probes), n(c.MaxRequests, 4096))
}
