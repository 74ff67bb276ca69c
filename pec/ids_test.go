package pec

import (
	"testing"

	"github.com/pkie/pkie/internal/pecwire"
)

// TestWireNames keeps the names pec gives the wire's values equal to the
// wire's: pec converts between the two by value.
func TestWireNames(t *testing.T) {
	if TransportQUIC != pecwire.QUIC || TransportTCP != pecwire.TCP || TicketTagSize != pecwire.TicketTagSize {
		t.Errorf("transports %q %q, tag size %d; the wire's are %q %q, %d", TransportQUIC, TransportTCP, TicketTagSize, pecwire.QUIC, pecwire.TCP, pecwire.TicketTagSize)
	}
	for s := ProofOK; s <= ProofTimeout+1; s++ {
		if s.String() != pecwire.ProofStatus(s).String() {
			t.Errorf("status %d is %q here, %q on the wire", s, s, pecwire.ProofStatus(s))
		}
	}
	for _, s := range []struct {
		pec  ProofStatus
		wire pecwire.ProofStatus
	}{{ProofOK, pecwire.ProofOK}, {ProofBusy, pecwire.ProofBusy}, {ProofUnsupported, pecwire.ProofUnsupported}, {ProofFailed, pecwire.ProofFailed}, {ProofTimeout, pecwire.ProofTimeout}} {
		if uint8(s.pec) != uint8(s.wire) {
			t.Errorf("%s is %d here, %d on the wire", s.pec, s.pec, s.wire)
		}
	}
}
