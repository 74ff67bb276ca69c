package pec

import (
	"fmt"
)

// ClientID is the cloud's random 4-byte name for a registered client (the
// PEC paper, §4.2.2). It changes with every registration.
type ClientID [4]byte

// String renders the identifier in hex.
func (id ClientID) String() string { return fmt.Sprintf("%x", id[:]) }

// Nonce names one TLS connection of a client: the cloud addresses the
// proofs for that connection by the client's identifier and the nonce.
type Nonce [8]byte

// String renders the nonce in hex.
func (n Nonce) String() string { return fmt.Sprintf("%x", n[:]) }

// TicketTagSize is the size of a Ticket's tag.
const TicketTagSize = 16

// Ticket lets a PEC server submit for a client once. The client mints one
// per PEC extension under the key of its session with the cloud (a key
// exported from that TLS session, which never travels), for exactly that
// nonce, server name, port and requests; the cloud takes a submission by
// any other session for the client only with a ticket whose tag verifies
// and whose counter it has not seen.
type Ticket struct {
	// Counter numbers the client's tickets on one session, from 0.
	Counter uint32
	// Tag is the HMAC-SHA256 tag over the counter and the submission
	// without its chain, truncated (docs/formats/pec.md).
	Tag [TicketTagSize]byte
}
