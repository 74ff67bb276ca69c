package cloud

import "github.com/pkie/pkie/internal/pecwire"

// ticketWindowSize is how far behind the newest ticket counter a client
// has shown the cloud a ticket may be and still be taken: the client
// numbers its PEC extensions in order, and servers forward them within a
// handshake, so only that many connections in flight at once can arrive
// out of order.
const ticketWindowSize = 1024

// ticketWindow remembers which ticket counters of one client session have
// been used, as IPsec's anti-replay window does (RFC 4303 §3.4.3): the
// highest counter seen and a bitmap of the ticketWindowSize below it. A
// counter at or below the window's bottom is refused as if used, so the
// memory stays constant however long the session lives.
type ticketWindow struct {
	top     uint32
	started bool
	bits    [ticketWindowSize / 64]uint64
}

func (w *ticketWindow) bit(n uint32) (*uint64, uint64) {
	i := n % ticketWindowSize
	return &w.bits[i/64], 1 << (i % 64)
}

// use marks counter n used, reporting false if it was, or is too old to
// tell.
func (w *ticketWindow) use(n uint32) bool {
	switch {
	case !w.started || n-w.top >= ticketWindowSize && n > w.top:
		clear(w.bits[:])
		w.top, w.started = n, true
	case n > w.top:
		for i := w.top + 1; ; i++ {
			word, b := w.bit(i)
			*word &^= b
			if i == n {
				break
			}
		}
		w.top = n
	case w.top-n >= ticketWindowSize:
		return false
	}
	word, b := w.bit(n)
	if *word&b != 0 {
		return false
	}
	*word |= b
	return true
}

// Why a submission by another session is not taken, as the submissions
// metric's outcome label.
const (
	ticketBad      = "bad_ticket"
	ticketReplayed = "replayed_ticket"
)

// useTicket checks the ticket of a submission another session made for
// this client and consumes it. It returns "" when the ticket is the
// client's own and unused, or why not.
func (s *session) useTicket(m *pecwire.Submit, t *pecwire.Ticket) string {
	if !t.Verify(s.ticketKey, m) {
		return ticketBad
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.tickets.use(t.Counter) {
		return ticketReplayed
	}
	return ""
}
