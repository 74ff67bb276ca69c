package synth

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/option"
)

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Limits)
		field string // "" when valid
	}{
		{"defaults", func(*Limits) {}, ""},
		{"small", func(l *Limits) { *l = Limits{1, 1, 1, time.Nanosecond, 0.001, 1, time.Nanosecond, 1} }, ""},
		{"max sni", func(l *Limits) { l.MaxSNI = 0 }, "MaxSNI"},
		{"rate", func(l *Limits) { l.RDNSRate = 0 }, "RDNSRate"},
		{"NaN rate", func(l *Limits) { l.RDNSRate = math.NaN() }, "RDNSRate"},
		{"concurrency", func(l *Limits) { l.RDNSConcurrency = -1 }, "RDNSConcurrency"},
		{"rdns max", func(l *Limits) { l.RDNSMax = 0 }, "RDNSMax"},
		{"cache max", func(l *Limits) { l.CacheMax = 0 }, "CacheMax"},
		{"targets max", func(l *Limits) { l.TargetsMax = 0 }, "TargetsMax"},
		{"timeout", func(l *Limits) { l.RDNSTimeout = 0 }, "RDNSTimeout"},
		{"span", func(l *Limits) { l.MaxSpan = -time.Second }, "MaxSpan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := DefaultLimits(100)
			tc.edit(&l)
			err := l.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var oe *option.Error
			if !errors.As(err, &oe) || !slices.Contains(oe.Fields, tc.field) {
				t.Fatalf("Validate = %v, want an *option.Error about %s", err, tc.field)
			}
		})
	}
}
