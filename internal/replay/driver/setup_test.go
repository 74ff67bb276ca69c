package driver

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/option"
	"github.com/pkie/pkie/internal/replay"
)

func TestSetupValidate(t *testing.T) {
	good := func() Setup {
		return Setup{Local: 1, API: "convergence", Conns: replay.ConnsReuse, Speedup: 1, Timeout: DefaultTimeout,
			MaxInFlight: DefaultMaxInFlight, Hosts: DefaultHosts, ProbeTimeout: 2 * time.Second, Dead: "refuse"}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Setup)
		field string // "" when valid
	}{
		{"local", func(*Setup) {}, ""},
		{"remote", func(s *Setup) { s.Local, s.Bundles = 0, []string{"a.notary"} }, ""},
		{"v1, fresh, silent", func(s *Setup) { s.API, s.Conns, s.Dead = "v1", replay.ConnsFresh, "silent" }, ""},
		{"sized local notary", func(s *Setup) { s.NotaryProbes, s.NotaryQueue, s.NotaryRequests = 100000, 1000000, 1000000 }, ""},
		{"until after from", func(s *Setup) { s.From, s.Until = time.Second, 2*time.Second }, ""},
		{"neither local nor bundles", func(s *Setup) { s.Local = 0 }, "Local"},
		{"both local and bundles", func(s *Setup) { s.Bundles = []string{"a.notary"} }, "Local"},
		{"17 local", func(s *Setup) { s.Local = 17 }, "Local"},
		{"negative local", func(s *Setup) { s.Local = -1 }, "Local"},
		{"api", func(s *Setup) { s.API = "v2" }, "API"},
		{"zero speedup", func(s *Setup) { s.Speedup = 0 }, "Speedup"},
		{"NaN speedup", func(s *Setup) { s.Speedup = math.NaN() }, "Speedup"},
		{"Inf speedup", func(s *Setup) { s.Speedup = math.Inf(1) }, "Speedup"},
		{"zero timeout", func(s *Setup) { s.Timeout = 0 }, "Timeout"},
		{"until not after from", func(s *Setup) { s.From, s.Until = 5*time.Second, 2*time.Second }, "Until"},
		{"negative from", func(s *Setup) { s.From = -time.Second }, "From"},
		{"no hosts", func(s *Setup) { s.Hosts = 0 }, "Hosts"},
		{"255 hosts", func(s *Setup) { s.Hosts = 255 }, "Hosts"},
		{"in flight", func(s *Setup) { s.MaxInFlight = 0 }, "MaxInFlight"},
		{"dead", func(s *Setup) { s.Dead = "gone" }, "Dead"},
		{"conns", func(s *Setup) { s.Conns = "pooled" }, "Conns"},
		{"too many probes", func(s *Setup) { s.NotaryProbes = 100001 }, "NotaryProbes"},
		{"negative queue", func(s *Setup) { s.NotaryQueue = -1 }, "NotaryProbes"},
		{"sizes without local", func(s *Setup) { s.Local, s.Bundles, s.NotaryRequests = 0, []string{"a.notary"}, 10 }, "NotaryProbes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			tc.edit(&s)
			err := s.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var oe *option.Error
			if !errors.As(err, &oe) {
				t.Fatalf("Validate = %v, want an *option.Error about %s", err, tc.field)
			}
			if !slices.Contains(oe.Fields, tc.field) {
				t.Errorf("Validate = %v (fields %v), want one about %s", err, oe.Fields, tc.field)
			}
		})
	}
}
