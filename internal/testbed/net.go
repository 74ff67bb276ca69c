package testbed

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
)

// Resolver maps test host names onto loopback listeners. It stands in for DNS
// on one network path: give each client or notary its own Resolver to give
// it its own view of the network (the MitM is on a path because that path's
// Resolver sends a name to it). Requested ports are ignored: a name maps to a
// listener's actual address, so "bank.test:443" reaches whatever loopback
// port the site bound.
type Resolver struct {
	mu sync.RWMutex
	m  map[string][]netip.AddrPort
}

// NewResolver returns an empty Resolver.
func NewResolver() *Resolver { return &Resolver{m: map[string][]netip.AddrPort{}} }

// Set maps host to addrs, replacing any earlier mapping.
func (r *Resolver) Set(host string, addrs ...netip.AddrPort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[strings.ToLower(host)] = addrs
}

// Clone returns an independent copy: a second path that starts out the same.
func (r *Resolver) Clone() *Resolver {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := NewResolver()
	for k, v := range r.m {
		c.m[k] = append([]netip.AddrPort(nil), v...)
	}
	return c
}

// Lookup implements probe.Lookup.
func (r *Resolver) Lookup(_ context.Context, host string, _ int) ([]netip.AddrPort, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.m[strings.ToLower(host)]
	if !ok {
		return nil, fmt.Errorf("testbed resolver: no such host %q", host)
	}
	return a, nil
}
