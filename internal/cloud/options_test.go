package cloud

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/option"
	"github.com/pkie/pkie/internal/pecwire"
)

// serveOptions are the options pkie cloud serve gives by default, with an
// open-file limit that allows 1,000 sessions.
func serveOptions() ServeOptions {
	return ServeOptions{
		Config: Config{
			Keepalive: DefaultKeepalive, MissedPings: DefaultMissedPings, HandshakeTimeout: DefaultHandshakeTimeout, WriteTimeout: DefaultWriteTimeout,
			MaxClients: DefaultMaxClients, MaxSessionsPerAddr: DefaultMaxSessionsAddr, MaxFrame: pecwire.DefaultMaxFrame,
			MaxPending: DefaultMaxPending, MaxJobs: DefaultMaxJobs, MaxJobsPerClient: DefaultMaxJobsPerClient,
			MaxProverCalls: DefaultMaxProverCalls, MaxBudget: DefaultMaxBudget, FileLimit: 1000 + FileReserve,
		},
		QUIC: ":4433", TCP: ":4433", HTTP: "localhost:9433",
	}
}

func TestServeOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		edit   func(*ServeOptions)
		fields []string // the Error's Fields; nil: valid
		msg    string
	}{
		{"defaults", func(*ServeOptions) {}, nil, ""},
		{"tcp only", func(o *ServeOptions) { o.QUIC = "" }, nil, ""},
		{"quic only, no http", func(o *ServeOptions) { o.TCP, o.HTTP = "", "" }, nil, ""},
		{"derived bounds zero", func(o *ServeOptions) { o.MaxSessions, o.MaxJobsPerAddr = 0, 0 }, nil, ""},
		{"sessions at the file limit", func(o *ServeOptions) { o.MaxSessions = 1000 }, nil, ""},
		{"peers", func(o *ServeOptions) { o.Peers = []string{"http://10.0.0.2:9433", "https://r.example/"} }, nil, ""},
		{"frame bounds", func(o *ServeOptions) { o.MaxFrame = MinFrame }, nil, ""},
		{"no rate limit", func(o *ServeOptions) { o.SubmitRate, o.SessionSubmitRate = -1, -1 }, nil, ""},

		{"no listener", func(o *ServeOptions) { o.QUIC, o.TCP = "", "" }, []string{"QUIC", "TCP"}, "QUIC and TCP are both empty: a cloud needs at least one listener"},
		{"zero clients", func(o *ServeOptions) { o.MaxClients = 0 }, []string{"MaxClients"}, "MaxClients must be positive"},
		{"negative missed pings", func(o *ServeOptions) { o.MissedPings = -1 }, []string{"MissedPings"}, "MissedPings must be positive"},
		{"zero per-addr sessions", func(o *ServeOptions) { o.MaxSessionsPerAddr = 0 }, []string{"MaxSessionsPerAddr"}, "MaxSessionsPerAddr must be positive"},
		{"zero frame", func(o *ServeOptions) { o.MaxFrame = 0 }, []string{"MaxFrame"}, "MaxFrame must be positive"},
		{"zero pending", func(o *ServeOptions) { o.MaxPending = 0 }, []string{"MaxPending"}, "MaxPending must be positive"},
		{"zero jobs", func(o *ServeOptions) { o.MaxJobs = 0 }, []string{"MaxJobs"}, "MaxJobs must be positive"},
		{"zero jobs per client", func(o *ServeOptions) { o.MaxJobsPerClient = 0 }, []string{"MaxJobsPerClient"}, "MaxJobsPerClient must be positive"},
		{"zero prover calls", func(o *ServeOptions) { o.MaxProverCalls = 0 }, []string{"MaxProverCalls"}, "MaxProverCalls must be positive"},
		{"negative sessions", func(o *ServeOptions) { o.MaxSessions = -1 }, []string{"MaxSessions", "MaxJobsPerAddr"}, "MaxSessions and MaxJobsPerAddr must not be negative"},
		{"negative jobs per addr", func(o *ServeOptions) { o.MaxJobsPerAddr = -1 }, []string{"MaxSessions", "MaxJobsPerAddr"}, "must not be negative"},
		{"sessions over the file limit", func(o *ServeOptions) { o.MaxSessions = 1001 }, []string{"MaxSessions"},
			"an open-file limit of 1256 allows 1000 sessions (256 descriptors are kept for /healthz, /metrics, TTP syncs, the data directory and the notary's probes), MaxSessions asks for 1001: raise the limit (ulimit -n) or lower MaxSessions"},
		{"file limit below the reserve", func(o *ServeOptions) { o.FileLimit = FileReserve }, []string{"MaxSessions"}, "an open-file limit of 256 allows 0 sessions"},
		{"peer with a path", func(o *ServeOptions) { o.Peers = []string{"http://10.0.0.2:9433/v1"} }, []string{"Peers"},
			`Peers "http://10.0.0.2:9433/v1": want the base URL of a replica's HTTP listener`},
		{"peer without scheme", func(o *ServeOptions) { o.Peers = []string{"http://ok:1", "10.0.0.2:9433"} }, []string{"Peers"}, "Peers "},
		{"frame too small", func(o *ServeOptions) { o.MaxFrame = MinFrame - 1 }, []string{"MaxFrame"}, "MaxFrame must be between 16384 and "},
		{"frame too large", func(o *ServeOptions) { o.MaxFrame = pecwire.MaxFrameLimit + 1 }, []string{"MaxFrame"}, "MaxFrame must be between"},
		{"zero keepalive", func(o *ServeOptions) { o.Keepalive = 0 }, []string{"Keepalive", "HandshakeTimeout", "WriteTimeout", "MaxBudget"},
			"Keepalive, HandshakeTimeout, WriteTimeout and MaxBudget must be positive"},
		{"negative budget", func(o *ServeOptions) { o.MaxBudget = -time.Second }, []string{"Keepalive", "HandshakeTimeout", "WriteTimeout", "MaxBudget"}, "must be positive"},
		{"keepalive beyond the wire", func(o *ServeOptions) { o.Keepalive = 0x100000000 * time.Millisecond }, []string{"Keepalive"}, "Keepalive 1193h2m47.296s does not fit the wire format"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := serveOptions()
			tt.edit(&o)
			err := o.Validate()
			if tt.fields == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var oe *option.Error
			if !errors.As(err, &oe) {
				t.Fatalf("Validate() = %v, want an *option.Error", err)
			}
			if !strings.Contains(oe.Msg, tt.msg) || strings.Join(oe.Fields, ",") != strings.Join(tt.fields, ",") || !strings.HasPrefix(err.Error(), "cloud: ") {
				t.Errorf("Validate() = %q (fields %v), want %q (fields %v)", err, oe.Fields, tt.msg, tt.fields)
			}
		})
	}
}
