package testbed

import (
	"context"
	"fmt"
	"time"
)

// SiteSpec describes one site of a topology.
type SiteSpec struct {
	Name string
	Alg  KeyAlg
	// Direct issues the leaf from the root itself (a chain of one); the
	// default is from the issuing intermediate.
	Direct bool
}

// NotarySpec describes one notary of a topology.
type NotarySpec struct {
	Name string
	RTT  time.Duration // distance from the client; 0 for next door
}

// TopologyOptions describe a whole world: sites, notaries, and which sites
// a man in the middle intercepts on the client's path.
type TopologyOptions struct {
	Sites     []SiteSpec
	Notaries  []NotarySpec
	Intercept []string
}

// DemoTopology is the world "pkie demo" shows: four sites with RSA and
// ECDSA leaves and chains of two shapes, three notaries (one at global
// distance), and the bank intercepted on the client's path by a MitM whose
// certificate chains to the same trusted root (a rogue intermediate, as in
// the TURKTRUST incident), so CA validation alone cannot tell.
func DemoTopology() TopologyOptions {
	return TopologyOptions{
		Sites: []SiteSpec{
			{Name: "bank.test", Alg: RSA2048},
			{Name: "mail.test", Alg: ECDSAP256},
			{Name: "news.test", Alg: ECDSAP384, Direct: true},
			{Name: "shop.test", Alg: RSA2048},
		},
		Notaries: []NotarySpec{
			{Name: "notary-near", RTT: 0},
			{Name: "notary-continental", RTT: ContinentalRTT},
			{Name: "notary-global", RTT: GlobalRTT},
		},
		Intercept: []string{"bank.test"},
	}
}

// Topology is a running world.
type Topology struct {
	Root     *CA
	Issuing  *CA // the legitimate intermediate
	Rogue    *CA // the attacker's intermediate, chaining to the same root
	Sites    []*Site
	Notaries []*Notary
	MitM     *MitM
	// ClientPath is the client's view of the network: intercepted names
	// lead to the MitM. NotaryPath is everyone else's: the real sites.
	ClientPath *Resolver
	NotaryPath *Resolver
}

// StartTopology starts every part of o on loopback. Close stops them.
func StartTopology(o TopologyOptions) (tp *Topology, err error) {
	tp = &Topology{NotaryPath: NewResolver()}
	defer func() {
		if err != nil {
			tp.Close()
		}
	}()
	if tp.Root, err = NewRootCA("pkie Demo Root CA", ECDSAP256); err != nil {
		return nil, err
	}
	if tp.Issuing, err = tp.Root.NewIntermediate("pkie Demo Issuing CA", ECDSAP256); err != nil {
		return nil, err
	}
	if tp.Rogue, err = tp.Root.NewIntermediate("Rogue Intermediate CA", ECDSAP256); err != nil {
		return nil, err
	}
	for _, s := range o.Sites {
		issuer := tp.Issuing
		if s.Direct {
			issuer = tp.Root
		}
		leaf, err := issuer.Issue(LeafOptions{DNSNames: []string{s.Name}, Alg: s.Alg})
		if err != nil {
			return nil, err
		}
		site, err := StartSite(s.Name, leaf, nil)
		if err != nil {
			return nil, err
		}
		tp.Sites = append(tp.Sites, site)
		tp.NotaryPath.Set(s.Name, site.Addr)
	}
	tp.ClientPath = tp.NotaryPath.Clone()
	if len(o.Intercept) > 0 {
		if tp.MitM, err = StartMitM(tp.Rogue, tp.NotaryPath); err != nil {
			return nil, err
		}
		for _, name := range o.Intercept {
			if _, err := tp.NotaryPath.Lookup(context.Background(), name, 0); err != nil {
				return nil, fmt.Errorf("testbed: intercepting %s: no such site", name)
			}
			tp.ClientPath.Set(name, tp.MitM.Addr)
		}
	}
	for _, ns := range o.Notaries {
		n, err := StartNotary(NotaryOptions{Name: ns.Name, Path: tp.NotaryPath, RTT: ns.RTT})
		if err != nil {
			return nil, err
		}
		tp.Notaries = append(tp.Notaries, n)
	}
	return tp, nil
}

// Site returns the named site, or nil.
func (tp *Topology) Site(name string) *Site {
	for _, s := range tp.Sites {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Close stops everything.
func (tp *Topology) Close() {
	for _, n := range tp.Notaries {
		n.Close()
	}
	if tp.MitM != nil {
		tp.MitM.Close()
	}
	for _, s := range tp.Sites {
		s.Close()
	}
}
