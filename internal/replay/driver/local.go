package driver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// LocalOptions configure a notary run in the replayer's process.
type LocalOptions struct {
	Name string // default "local"
	// Lookup is how the notary's prober resolves names: a synthetic
	// world's (testbed.World.Lookup).
	Lookup probe.Lookup
	// ProbeTimeout bounds each probe; 0 means probe.DefaultTimeout, 2 s,
	// as the notary of Forced Perspectives §3.2 was configured.
	ProbeTimeout time.Duration
	// Dir holds the SQLite history; empty means a temporary directory
	// removed on Close.
	Dir string
	// Sources is how many source addresses the replay's clients share
	// (Options.Sources), for sizing the per-client shares.
	Sources int
	// MaxInFlight is the replay's bound on requests in flight, for sizing
	// the connection caps.
	MaxInFlight int
	// Config overrides the notary's other settings; Identity, History and
	// Prober are filled in, and the per-client shares are sized as
	// StartLocal says unless set.
	Config notary.Config
}

// Local is a notary served on loopback in the replayer's process, its
// listener's bytes counted.
type Local struct {
	Bundle   *consensus.Bundle
	Addr     netip.AddrPort
	Identity *notary.Identity
	Notary   *notary.Notary
	// Config is the notary's configuration as given to notary.New (its
	// zero fields then mean notary's defaults).
	Config notary.Config

	ln      *testbed.CountingListener
	history store.History
	cancel  context.CancelFunc
	done    chan error
	tempDir string
}

// StartLocal starts a notary on 127.0.0.1 with a SQLite history.
//
// Its per-client shares are sized for the replay: the notary shares its
// request slots, probe slots and connections fairly per client address,
// and a replay's thousands of clients arrive from only o.Sources loopback
// addresses, each standing for about 1/Sources of them. Each address gets
// twice its fair part (the clients do not hash onto the addresses evenly)
// of requests and probes, at least the notary's own default share, so the
// fairness still works between the addresses without throttling a replay
// the real notary, seeing every client apart, would not have throttled.
// Connections per address are sized to carry MaxInFlight / Sources
// requests at HTTP/2's 100 streams each, twice over.
func StartLocal(o LocalOptions) (*Local, error) {
	if o.Name == "" {
		o.Name = "local"
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = probe.DefaultTimeout
	}
	if o.Sources <= 0 {
		o.Sources = 1
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	dir, tmp := o.Dir, ""
	if dir == "" {
		d, err := os.MkdirTemp("", "pkie-replay-notary-")
		if err != nil {
			return nil, err
		}
		dir, tmp = d, d
	}
	fail := func(err error) (*Local, error) {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return nil, err
	}
	id, err := notary.NewIdentity(o.Name, []string{"127.0.0.1", "localhost"})
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err := store.Open(ctx, filepath.Join(dir, notary.FileHistory))
	if err != nil {
		cancel()
		return fail(err)
	}
	cfg := o.Config
	cfg.Identity, cfg.History = id, h
	cfg.Prober = probe.New(probe.Options{AllowPrivate: true, Lookup: o.Lookup, Vantage: o.Name, Timeout: o.ProbeTimeout})
	share := func(pool, def int) int { return max(def, (2*pool+o.Sources-1)/o.Sources) }
	maxProbes := cfg.MaxProbes
	if maxProbes <= 0 {
		maxProbes = 64
	}
	maxRequests := cfg.MaxRequests
	if maxRequests <= 0 {
		maxRequests = 4096
	}
	if cfg.MaxProbesPerClient <= 0 {
		cfg.MaxProbesPerClient = share(maxProbes, max(1, maxProbes/8))
	}
	if cfg.MaxRequestsPerClient <= 0 {
		cfg.MaxRequestsPerClient = share(maxRequests, max(1, maxRequests/16))
	}
	if cfg.Conns.MaxConnsPerClient <= 0 {
		cfg.Conns.MaxConnsPerClient = max(64, 2*(o.MaxInFlight/o.Sources/100+1))
	}
	if cfg.Conns.MaxConns <= 0 {
		cfg.Conns.MaxConns = max(4096, cfg.Conns.MaxConnsPerClient*o.Sources)
	}
	n, err := notary.New(cfg)
	if err != nil {
		cancel()
		h.Close()
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		h.Close()
		return fail(fmt.Errorf("driver: local notary: %w", err))
	}
	l := &Local{
		Identity: id, Notary: n, Config: cfg, history: h, cancel: cancel, done: make(chan error, 1), tempDir: tmp,
		Addr: ln.Addr().(*net.TCPAddr).AddrPort(),
	}
	l.ln = testbed.NewCountingListener(ln)
	go func() { l.done <- n.ServeTLS(ctx, l.ln) }()
	nb := id.Bundle(l.Addr.Addr().String(), int(l.Addr.Port()), 0, o.Name, "", "")
	raw, err := nb.MarshalIndent()
	if err == nil {
		l.Bundle, err = consensus.ParseBundle(raw)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("driver: local notary bundle: %w", err)
	}
	return l, nil
}

// Bytes is the TCP payload the notary's listener has carried, both ways.
func (l *Local) Bytes() int64 { return l.ln.Bytes() }

// Accepts is the connections the notary's listener has accepted.
func (l *Local) Accepts() int64 { return l.ln.Accepts() }

// Close stops the notary and removes its temporary files.
func (l *Local) Close() error {
	l.cancel()
	err := <-l.done
	l.history.Close()
	if l.tempDir != "" {
		os.RemoveAll(l.tempDir)
	}
	return err
}
