package serve

import (
	"fmt"
	"net"
)

// sessionListeners are the sockets of a role that serves PEC sessions
// (the cloud, the forwarder): QUIC, TLS over TCP, and plain HTTP for
// /healthz and /metrics. Each is nil when its address is empty.
type sessionListeners struct {
	quic      net.PacketConn
	tcp, http net.Listener
}

// bindSessionListeners binds the addresses that are not empty, before
// anything else starts, so that a busy port is found at once. On an error
// the sockets already bound are closed.
func bindSessionListeners(quicAddr, tcpAddr, httpAddr string) (*sessionListeners, error) {
	l := &sessionListeners{}
	var err error
	if quicAddr != "" {
		if l.quic, err = net.ListenPacket("udp", quicAddr); err != nil {
			return nil, fmt.Errorf("--quic: %w", err)
		}
	}
	if tcpAddr != "" {
		if l.tcp, err = net.Listen("tcp", tcpAddr); err != nil {
			l.Close()
			return nil, fmt.Errorf("--tcp: %w", err)
		}
	}
	if httpAddr != "" {
		if l.http, err = net.Listen("tcp", httpAddr); err != nil {
			l.Close()
			return nil, fmt.Errorf("--http: %w", err)
		}
	}
	return l, nil
}

// Close closes every socket bound.
func (l *sessionListeners) Close() {
	if l.quic != nil {
		l.quic.Close()
	}
	if l.tcp != nil {
		l.tcp.Close()
	}
	if l.http != nil {
		l.http.Close()
	}
}
