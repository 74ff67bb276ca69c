package testbed

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/probe"
)

// NotaryOptions place a notary in the testbed.
type NotaryOptions struct {
	Name string
	// Path is the notary's view of the network: how it resolves the sites
	// it probes. A notary off the client's path gets a Resolver that leads
	// to the real sites.
	Path *Resolver
	// RTT, when set, puts the notary behind a DelayProxy: clients reach it
	// at that distance.
	RTT time.Duration
	// DSN is the history store; empty means a SQLite file in Dir.
	DSN string
	// Dir holds the notary's files; empty means a new temporary directory
	// removed on Close.
	Dir string
	// Config overrides (MaxAge, MaxProbes, …); Identity, History and Prober
	// are filled in.
	Config notary.Config
}

// Notary is a running notary in the testbed.
type Notary struct {
	*notary.Notary
	Name     string
	Addr     netip.AddrPort // what clients dial (the proxy, when RTT is set)
	Direct   netip.AddrPort // the notary's own listener
	Bundle   notary.Bundle
	Identity *notary.Identity
	History  store.History

	cancel  context.CancelFunc
	done    chan error
	proxy   *DelayProxy
	tempDir string
}

// StartNotary starts a notary on loopback.
func StartNotary(o NotaryOptions) (*Notary, error) {
	dir, tmp := o.Dir, ""
	if dir == "" {
		d, err := os.MkdirTemp("", "pkie-notary-")
		if err != nil {
			return nil, err
		}
		dir, tmp = d, d
	}
	id, err := notary.NewIdentity(o.Name, []string{"127.0.0.1", "localhost"})
	if err != nil {
		return nil, err
	}
	dsn := o.DSN
	if dsn == "" {
		dsn = filepath.Join(dir, notary.FileHistory)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err := store.Open(ctx, dsn)
	if err != nil {
		cancel()
		return nil, err
	}
	cfg := o.Config
	cfg.Identity, cfg.History = id, h
	var lookup probe.Lookup
	if o.Path != nil {
		lookup = o.Path.Lookup
	}
	cfg.Prober = probe.New(probe.Options{AllowPrivate: true, Lookup: lookup, Vantage: o.Name})
	n, err := notary.New(cfg)
	if err != nil {
		cancel()
		h.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		h.Close()
		return nil, fmt.Errorf("testbed: notary %s: %w", o.Name, err)
	}
	tn := &Notary{
		Notary: n, Name: o.Name, Identity: id, History: h, cancel: cancel, done: make(chan error, 1), tempDir: tmp,
		Direct: ln.Addr().(*net.TCPAddr).AddrPort(),
	}
	tn.Addr = tn.Direct
	go func() { tn.done <- n.ServeTLS(ctx, ln) }()
	if o.RTT > 0 {
		p, err := StartDelayProxy(tn.Direct.String(), o.RTT)
		if err != nil {
			tn.Close()
			return nil, err
		}
		tn.proxy, tn.Addr = p, p.Addr
	}
	tn.Bundle = id.Bundle(tn.Addr.Addr().String(), int(tn.Addr.Port()), 0, o.Name, "", "")
	return tn, nil
}

// WriteBundle writes the notary's .notary bundle into dir.
func (n *Notary) WriteBundle(dir string) (string, error) {
	b, err := n.Bundle.MarshalIndent()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, n.Name+".notary")
	return path, os.WriteFile(path, b, 0o644)
}

// Close stops the notary and removes its temporary files.
func (n *Notary) Close() error {
	if n.proxy != nil {
		n.proxy.Close()
	}
	n.cancel()
	err := <-n.done
	n.History.Close()
	if n.tempDir != "" {
		os.RemoveAll(n.tempDir)
	}
	return err
}
