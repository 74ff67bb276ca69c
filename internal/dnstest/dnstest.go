// Package dnstest runs a real DNS server on loopback UDP for tests of
// reverse DNS: it answers PTR queries from a table, NXDOMAIN for other
// names, SERVFAIL for names it is told to fail, and counts every query.
package dnstest

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Server is a DNS server on 127.0.0.1.
type Server struct {
	// Addr is its "127.0.0.1:port".
	Addr string

	mu      sync.Mutex
	queries int64
	asked   map[string]int
}

// Start starts a server answering PTR queries for the addresses of ptr with
// their names (each a DNS name, with or without the final dot), and
// SERVFAIL for the addresses of fail. It stops when tb's test ends.
func Start(tb testing.TB, ptr map[netip.Addr][]string, fail map[netip.Addr]bool) *Server {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{Addr: pc.LocalAddr().String(), asked: map[string]int{}}
	table := map[string][]string{}
	for a, names := range ptr {
		table[ReverseName(a)] = names
	}
	failing := map[string]bool{}
	for a := range fail {
		failing[ReverseName(a)] = true
	}
	done := make(chan struct{})
	tb.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := s.answer(buf[:n], table, failing); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	return s
}

func (s *Server) answer(msg []byte, table map[string][]string, failing map[string]bool) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	s.queries++
	s.asked[name]++
	s.mu.Unlock()
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	names, found := table[name]
	switch {
	case failing[name]:
		rh.RCode = dnsmessage.RCodeServerFailure
	case !found || q.Type != dnsmessage.TypePTR:
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if rh.RCode == dnsmessage.RCodeSuccess {
		for _, n := range names {
			if !strings.HasSuffix(n, ".") {
				n += "."
			}
			ptr, err := dnsmessage.NewName(n)
			if err != nil {
				continue
			}
			b.PTRResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60},
				dnsmessage.PTRResource{PTR: ptr})
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// Queries is how many queries the server has received.
func (s *Server) Queries() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

// Asked is how many queries named a's reverse name.
func (s *Server) Asked(a netip.Addr) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[ReverseName(a)]
}

// ReverseName is a's in-addr.arpa or ip6.arpa name, lower case, rooted.
func ReverseName(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		return netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]}).String() + ".in-addr.arpa."
	}
	b := a.As16()
	const hex = "0123456789abcdef"
	var sb strings.Builder
	for i := 15; i >= 0; i-- {
		sb.WriteByte(hex[b[i]&0xf])
		sb.WriteByte('.')
		sb.WriteByte(hex[b[i]>>4])
		sb.WriteByte('.')
	}
	sb.WriteString("ip6.arpa.")
	return sb.String()
}
