package cloud

import (
	"time"

	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/option"
	"github.com/pkie/pkie/internal/pecwire"
)

// MinFrame is the smallest MaxFrame ServeOptions accepts: below it a
// chain of ordinary certificates would not fit one Submit.
const MinFrame = 16 << 10

// ServeOptions are what a serving command (pkie cloud serve) gives a
// cloud: its Config with every bound explicit, its listeners and its
// peers. Unlike Config, where zero takes the default, a zero bound here
// is refused, since the command's flags default to the Default constants
// and a zero the user typed would otherwise silently mean something else.
// MaxSessions and MaxJobsPerAddr, whose defaults derive from other
// bounds, may be zero.
type ServeOptions struct {
	Config
	// QUIC, TCP and HTTP are the addresses of the listeners; empty: none.
	// QUIC or TCP must be given.
	QUIC, TCP, HTTP string
	// Peers are ProverOptions.Peers, each checked by CheckPeer.
	Peers []string
}

// Validate reports the first option of o that is out of range, as an
// *option.Error naming its fields. It does no I/O beyond reading the
// process's open-file limit when o.FileLimit is zero, so that a command
// reports a bad option before anything is loaded, bound or synced.
func (o *ServeOptions) Validate() error {
	if o.QUIC == "" && o.TCP == "" {
		return optErr([]string{"QUIC", "TCP"}, "QUIC and TCP are both empty: a cloud needs at least one listener")
	}
	for _, v := range []struct {
		field string
		n     int
	}{{"MissedPings", o.MissedPings}, {"MaxClients", o.MaxClients}, {"MaxSessionsPerAddr", o.MaxSessionsPerAddr},
		{"MaxFrame", o.MaxFrame}, {"MaxPending", o.MaxPending}, {"MaxJobs", o.MaxJobs}, {"MaxJobsPerClient", o.MaxJobsPerClient},
		{"MaxProverCalls", o.MaxProverCalls}} {
		if v.n <= 0 {
			return optErr([]string{v.field}, "%s must be positive", v.field)
		}
	}
	if o.MaxSessions < 0 || o.MaxJobsPerAddr < 0 {
		return optErr([]string{"MaxSessions", "MaxJobsPerAddr"}, "MaxSessions and MaxJobsPerAddr must not be negative")
	}
	// Sessions past the open-file limit would take the descriptors
	// /healthz and the TTP syncs need.
	lim := o.FileLimit
	if lim == 0 {
		lim = httplimit.FileLimit()
	}
	if n := SessionsFor(lim); o.MaxSessions > n || n < 1 {
		return optErr([]string{"MaxSessions"}, "an open-file limit of %d allows %d sessions (%d descriptors are kept for /healthz, /metrics, TTP syncs, the data directory and the notary's probes), MaxSessions asks for %d: raise the limit (ulimit -n) or lower MaxSessions",
			lim, max(0, n), FileReserve, o.MaxSessions)
	}
	for _, p := range o.Peers {
		if err := CheckPeer(p); err != nil {
			return optErr([]string{"Peers"}, "Peers %v", err)
		}
	}
	if o.MaxFrame > pecwire.MaxFrameLimit || o.MaxFrame < MinFrame {
		return optErr([]string{"MaxFrame"}, "MaxFrame must be between %d and %d", MinFrame, pecwire.MaxFrameLimit)
	}
	if o.Keepalive <= 0 || o.HandshakeTimeout <= 0 || o.WriteTimeout <= 0 || o.MaxBudget <= 0 {
		return optErr([]string{"Keepalive", "HandshakeTimeout", "WriteTimeout", "MaxBudget"}, "Keepalive, HandshakeTimeout, WriteTimeout and MaxBudget must be positive")
	}
	// Registered carries the interval in milliseconds in 32 bits; New
	// refuses more too, but only after the provers have synced.
	if o.Keepalive/time.Millisecond > 0xffffffff {
		return optErr([]string{"Keepalive"}, "Keepalive %v does not fit the wire format (at most %v)", o.Keepalive, 0xffffffff*time.Millisecond)
	}
	return nil
}

func optErr(fields []string, format string, a ...any) error {
	return option.Errorf("cloud", fields, format, a...)
}
