package synth

import (
	"time"

	"github.com/pkie/pkie/internal/option"
)

// Limits are the bounds of one synthesis, as pkie replay synth takes them:
// each must be positive (a zero here is a mistake, not "the default"; the
// defaults are the Default… constants).
type Limits struct {
	// MaxSNI bounds the ssl.log server names held in memory
	// (replay.Options.MaxSNI).
	MaxSNI int
	// CacheMax, TargetsMax and MaxSpan are Config's.
	CacheMax, TargetsMax int
	MaxSpan              time.Duration
	// RDNSRate, RDNSConcurrency and RDNSTimeout are ReverseDNS's Rate,
	// Concurrency and Timeout; RDNSMax bounds the distinct addresses
	// looked up (NewAddrSet).
	RDNSRate        float64
	RDNSConcurrency int
	RDNSTimeout     time.Duration
	RDNSMax         int
}

// DefaultLimits returns the defaults.
func DefaultLimits(maxSNI int) Limits {
	return Limits{
		MaxSNI: maxSNI, CacheMax: DefaultCacheMax, TargetsMax: DefaultTargetsMax, MaxSpan: DefaultMaxSpan,
		RDNSRate: DefaultRDNSRate, RDNSConcurrency: DefaultRDNSConcurrency, RDNSTimeout: DefaultRDNSTimeout, RDNSMax: DefaultRDNSMax,
	}
}

// Validate reports the first limit that is not positive, as an
// *option.Error.
func (l *Limits) Validate() error {
	bad := func(fields ...string) error {
		msg := fields[0]
		for i, f := range fields[1:] {
			if i == len(fields)-2 {
				msg += " and " + f
			} else {
				msg += ", " + f
			}
		}
		return option.Errorf("synth", fields, "%s must be positive", msg)
	}
	switch {
	case l.MaxSNI <= 0:
		return bad("MaxSNI")
	case !(l.RDNSRate > 0):
		return bad("RDNSRate")
	case l.RDNSConcurrency <= 0 || l.RDNSMax <= 0 || l.CacheMax <= 0 || l.TargetsMax <= 0:
		return bad("RDNSConcurrency", "RDNSMax", "CacheMax", "TargetsMax")
	case l.RDNSTimeout <= 0 || l.MaxSpan <= 0:
		return bad("RDNSTimeout", "MaxSpan")
	}
	return nil
}
