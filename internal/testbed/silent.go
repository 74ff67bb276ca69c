package testbed

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
)

// Silent is a loopback TCP listener that accepts connections and never
// says anything: a notary or site that hangs, for timeout paths.
type Silent struct {
	Addr netip.AddrPort

	ln    net.Listener
	done  chan struct{}
	mu    sync.Mutex
	conns []net.Conn
}

// StartSilent starts a Silent listener on 127.0.0.1.
func StartSilent() (*Silent, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testbed: silent listener: %w", err)
	}
	s := &Silent{Addr: ln.Addr().(*net.TCPAddr).AddrPort(), ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Close stops accepting and closes every connection held open.
func (s *Silent) Close() error {
	err := s.ln.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	return err
}
