// Package replay turns network traces into the requests a deployment of
// notaries would have received, and replays them: the method of "Forced
// Perspectives" (IMC 2014, §3). This file is its first stage's output: the
// flow, read from whatever trace format a network has (package readers:
// nfdump CSV, Zeek conn.log and ssl.log, pcap and pcapng, pkie's own JSON
// lines).
package replay

import (
	"net/netip"
	"time"
)

// Flow is one TCP connection seen in a trace: what the later stages need of
// it, and what the formats can say. Fields a format does not have are zero.
type Flow struct {
	// Start is when the connection's first packet was seen.
	Start time.Time `json:"start"`
	// Duration is from the first packet to the last.
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Client is the connection's initiator. Traces are usually anonymised:
	// the address then names a client consistently without being its own.
	Client netip.Addr `json:"client"`
	// Server and Port are the responder's address and port.
	Server netip.Addr `json:"server"`
	Port   uint16     `json:"port"`
	// ServerName is the TLS server name (SNI) the client sent, lower case,
	// when the trace has it.
	ServerName string `json:"sni,omitempty"`
	// Bytes and packets each way, when the format counts them: Out from
	// the client to the server, In back.
	BytesOut   uint64 `json:"bytes_out,omitempty"`
	BytesIn    uint64 `json:"bytes_in,omitempty"`
	PacketsOut uint64 `json:"packets_out,omitempty"`
	PacketsIn  uint64 `json:"packets_in,omitempty"`
}
