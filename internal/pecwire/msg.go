// Package pecwire is the wire format between PEC clients, servers and the
// cloud (the PEC paper's client–cloud and server–cloud protocols, §4.2.2 and
// §4.2.3): framed binary messages, the same over QUIC and over TLS on TCP,
// and the bundle a client pins a cloud by.
//
// The paper ran these messages over UDP with a hand-built reliability layer
// (sequence numbers, retransmission timers, keepalives; §8.1). pkie runs them
// over QUIC, which gives all of that plus encryption, connection migration
// across NAT rebinding and loss recovery as specified, and over TLS on TCP
// where UDP is blocked. One bidirectional stream per client session carries
// the messages in order: each proof is a few kilobytes, so head-of-line
// blocking costs at most one retransmission, and one ordered stream keeps
// the two transports identical.
//
// Every message is a frame: type (uint8) ‖ length (uint24) ‖ body, integers
// big-endian. docs/formats/pec.md documents each body.
package pecwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/termtext"
)

// Version is the protocol version a client asks for in Register.
const Version = 1

// Type is a message type.
type Type uint8

// Message types.
const (
	TypeRegister   Type = 1 // client → cloud: first message of a session
	TypeRegistered Type = 2 // cloud → client: the client's identifier
	TypePing       Type = 3 // client → cloud: keepalive
	TypePong       Type = 4 // cloud → client: the service is alive
	TypeSubmit     Type = 5 // client or server → cloud: a chain to prove
	TypeProof      Type = 6 // cloud → client: one enhancement's outcome
	TypeReject     Type = 7 // cloud → submitter: a whole submission refused
	TypeError      Type = 8 // either way: the session ends, and why
)

// Limits.
const (
	// DefaultMaxFrame bounds a frame's body unless configured otherwise: a
	// chain of 8 certificates of 4 KB each with room to spare. The PEC paper
	// measured 4,553-byte server flights on average (§6.3.2).
	DefaultMaxFrame = 64 << 10
	// MaxFrameLimit is the most a frame can carry (uint24).
	MaxFrameLimit = 1<<24 - 1
	// MaxChain bounds the certificates of one submission.
	MaxChain = 16
	// MaxText bounds a message's human-readable text.
	MaxText = 1024
)

// ClientID is the cloud's random 4-byte name for a registered client (PEC
// paper §4.2.2).
type ClientID [4]byte

// String renders the identifier in hex.
func (id ClientID) String() string { return fmt.Sprintf("%x", id[:]) }

// Nonce names one TLS connection of a client.
type Nonce [8]byte

// String renders the nonce in hex.
func (n Nonce) String() string { return fmt.Sprintf("%x", n[:]) }

// A Message is one of the types below.
type Message interface {
	Type() Type
	appendBody(b []byte) ([]byte, error)
	decodeBody(r *reader) error
}

// Register opens a session.
type Register struct {
	Version uint8
}

// Registered answers Register.
type Registered struct {
	Version  uint8
	ClientID ClientID
	// Keepalive is how often the cloud expects a Ping; a client that
	// misses a few is forgotten.
	Keepalive time.Duration
	// MaxFrame is the largest frame body the cloud accepts.
	MaxFrame uint32
}

// Ping is a keepalive; the cloud answers each with a Pong of the same
// sequence number.
type Ping struct{ Seq uint64 }

// Pong answers a Ping.
type Pong struct{ Seq uint64 }

// Submit asks the cloud to prove a chain for one connection of a client.
type Submit struct {
	ClientID ClientID
	Nonce    Nonce
	// Budget is how long the client will wait for the proofs, from the
	// moment it sent this; the cloud gives up on a prover after it.
	Budget     time.Duration
	ServerName string
	Port       uint16
	Requests   []pkie.Request
	// Chain is the server's chain, DER, leaf first.
	Chain [][]byte
}

// ProofStatus is the outcome of one enhancement for one submission.
type ProofStatus uint8

// Proof statuses.
const (
	ProofOK          ProofStatus = 0 // Proof holds the enhancement's proof
	ProofBusy        ProofStatus = 1 // the prover is overloaded
	ProofUnsupported ProofStatus = 2 // the cloud does not host this enhancement, or it cannot prove this
	ProofFailed      ProofStatus = 3 // the prover failed; Text says why
	ProofTimeout     ProofStatus = 4 // the prover did not answer within the budget
)

func (s ProofStatus) String() string {
	switch s {
	case ProofOK:
		return "ok"
	case ProofBusy:
		return "busy"
	case ProofUnsupported:
		return "unsupported"
	case ProofFailed:
		return "failed"
	case ProofTimeout:
		return "timeout"
	}
	return fmt.Sprintf("status %d", uint8(s))
}

// Proof carries one enhancement's outcome for one submission.
type Proof struct {
	ClientID ClientID
	Nonce    Nonce
	// Digest is the submission's (Submit.Digest): the client matches
	// outcomes by it, not by the nonce alone.
	Digest Digest
	ID     pkie.ID
	Status ProofStatus
	// Proof is the proof when Status is ProofOK.
	Proof *pkie.Proof
	// Text says why otherwise.
	Text string
}

// RejectCode says why a submission was refused as a whole.
type RejectCode uint8

// Reject codes.
const (
	RejectBusy     RejectCode = 1 // too many jobs in flight: try another point of presence
	RejectInvalid  RejectCode = 2 // the submission is malformed (a certificate does not parse…)
	RejectUnknown  RejectCode = 3 // no registered client has this identifier
	RejectTooLarge RejectCode = 4 // beyond the cloud's limits
	RejectLimited  RejectCode = 5 // this submitter is over its share
)

func (c RejectCode) String() string {
	switch c {
	case RejectBusy:
		return "busy"
	case RejectInvalid:
		return "invalid"
	case RejectUnknown:
		return "unknown client"
	case RejectTooLarge:
		return "too large"
	case RejectLimited:
		return "rate limited"
	}
	return fmt.Sprintf("code %d", uint8(c))
}

// Reject refuses a submission.
type Reject struct {
	Nonce Nonce
	// Digest is the refused submission's (Submit.Digest).
	Digest Digest
	Code   RejectCode
	Text   string
}

// Error ends a session.
type Error struct {
	Code RejectCode
	Text string
}

func (*Register) Type() Type   { return TypeRegister }
func (*Registered) Type() Type { return TypeRegistered }
func (*Ping) Type() Type       { return TypePing }
func (*Pong) Type() Type       { return TypePong }
func (*Submit) Type() Type     { return TypeSubmit }
func (*Proof) Type() Type      { return TypeProof }
func (*Reject) Type() Type     { return TypeReject }
func (*Error) Type() Type      { return TypeError }

// Error lets a received Error be returned as one.
func (e *Error) Error() string { return fmt.Sprintf("cloud: %s: %s", e.Code, e.Text) }

func (m *Register) appendBody(b []byte) ([]byte, error) { return append(b, m.Version), nil }
func (m *Register) decodeBody(r *reader) error {
	m.Version = r.u8()
	return nil
}

func (m *Registered) appendBody(b []byte) ([]byte, error) {
	b = append(b, m.Version)
	b = append(b, m.ClientID[:]...)
	b = binary.BigEndian.AppendUint32(b, durationMillis(m.Keepalive))
	return binary.BigEndian.AppendUint32(b, m.MaxFrame), nil
}
func (m *Registered) decodeBody(r *reader) error {
	m.Version = r.u8()
	r.copy(m.ClientID[:])
	m.Keepalive = time.Duration(r.u32()) * time.Millisecond
	m.MaxFrame = r.u32()
	return nil
}

func (m *Ping) appendBody(b []byte) ([]byte, error) {
	return binary.BigEndian.AppendUint64(b, m.Seq), nil
}
func (m *Ping) decodeBody(r *reader) error {
	m.Seq = r.u64()
	return nil
}
func (m *Pong) appendBody(b []byte) ([]byte, error) {
	return binary.BigEndian.AppendUint64(b, m.Seq), nil
}
func (m *Pong) decodeBody(r *reader) error {
	m.Seq = r.u64()
	return nil
}

func (m *Submit) appendBody(b []byte) ([]byte, error) {
	if len(m.ServerName) > 255 {
		return nil, fmt.Errorf("pecwire: server name of %d bytes, at most 255", len(m.ServerName))
	}
	if len(m.Chain) == 0 || len(m.Chain) > MaxChain {
		return nil, fmt.Errorf("pecwire: chain of %d certificates, want 1 to %d", len(m.Chain), MaxChain)
	}
	reqs, err := pkie.MarshalRequests(m.Requests)
	if err != nil {
		return nil, err
	}
	if len(reqs) > 0xffff {
		return nil, errors.New("pecwire: requests exceed 65535 bytes")
	}
	b = append(b, m.ClientID[:]...)
	b = append(b, m.Nonce[:]...)
	b = binary.BigEndian.AppendUint32(b, durationMillis(m.Budget))
	b = append(b, byte(len(m.ServerName)))
	b = append(b, m.ServerName...)
	b = binary.BigEndian.AppendUint16(b, m.Port)
	b = binary.BigEndian.AppendUint16(b, uint16(len(reqs)))
	b = append(b, reqs...)
	b = append(b, byte(len(m.Chain)))
	for _, c := range m.Chain {
		if len(c) == 0 || len(c) > MaxFrameLimit {
			return nil, fmt.Errorf("pecwire: certificate of %d bytes", len(c))
		}
		b = appendUint24(b, len(c))
		b = append(b, c...)
	}
	return b, nil
}
func (m *Submit) decodeBody(r *reader) error {
	r.copy(m.ClientID[:])
	r.copy(m.Nonce[:])
	m.Budget = time.Duration(r.u32()) * time.Millisecond
	name := r.bytes(int(r.u8()))
	if !utf8.Valid(name) {
		return errors.New("server name is not UTF-8")
	}
	m.ServerName = string(name)
	m.Port = r.u16()
	reqs := r.bytes(int(r.u16()))
	if r.err != nil {
		return r.err
	}
	var err error
	if m.Requests, err = pkie.ParseRequests(reqs); err != nil {
		return err
	}
	n := int(r.u8())
	if r.err == nil && (n == 0 || n > MaxChain) {
		return fmt.Errorf("chain of %d certificates, want 1 to %d", n, MaxChain)
	}
	m.Chain = make([][]byte, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		c := r.bytes(r.u24())
		if r.err == nil && len(c) == 0 {
			return fmt.Errorf("certificate %d is empty", i)
		}
		m.Chain = append(m.Chain, c)
	}
	return nil
}

func (m *Proof) appendBody(b []byte) ([]byte, error) {
	var data []byte
	if m.Status == ProofOK {
		if m.Proof == nil {
			return nil, errors.New("pecwire: ok proof message without a proof")
		}
		if m.Proof.ID != m.ID {
			return nil, fmt.Errorf("pecwire: proof of %s in a message for %s", m.Proof.ID, m.ID)
		}
		var err error
		if data, err = m.Proof.MarshalBinary(); err != nil {
			return nil, err
		}
	} else {
		data = []byte(clip(m.Text))
	}
	b = append(b, m.ClientID[:]...)
	b = append(b, m.Nonce[:]...)
	b = append(b, m.Digest[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(m.ID))
	b = append(b, byte(m.Status))
	b = appendUint24(b, len(data))
	return append(b, data...), nil
}
func (m *Proof) decodeBody(r *reader) error {
	r.copy(m.ClientID[:])
	r.copy(m.Nonce[:])
	r.copy(m.Digest[:])
	m.ID = pkie.ID(r.u16())
	m.Status = ProofStatus(r.u8())
	data := r.bytes(r.u24())
	if r.err != nil {
		return r.err
	}
	if m.Status > ProofTimeout {
		return fmt.Errorf("unknown proof status %d", m.Status)
	}
	if m.Status != ProofOK {
		if len(data) > MaxText {
			return fmt.Errorf("proof status text of %d bytes, at most %d", len(data), MaxText)
		}
		if err := termtext.Check(string(data)); err != nil {
			return fmt.Errorf("proof status text: %w", err)
		}
		m.Text = string(data)
		return nil
	}
	m.Proof = new(pkie.Proof)
	if err := m.Proof.UnmarshalBinary(data); err != nil {
		return err
	}
	if m.Proof.ID != m.ID {
		return fmt.Errorf("proof of %s in a message for %s", m.Proof.ID, m.ID)
	}
	return nil
}

func (m *Reject) appendBody(b []byte) ([]byte, error) {
	b = append(b, m.Nonce[:]...)
	b = append(b, m.Digest[:]...)
	b = append(b, byte(m.Code))
	return appendText(b, m.Text), nil
}
func (m *Reject) decodeBody(r *reader) error {
	r.copy(m.Nonce[:])
	r.copy(m.Digest[:])
	m.Code = RejectCode(r.u8())
	var err error
	m.Text, err = r.text()
	return err
}

func (m *Error) appendBody(b []byte) ([]byte, error) {
	b = append(b, byte(m.Code))
	return appendText(b, m.Text), nil
}
func (m *Error) decodeBody(r *reader) error {
	m.Code = RejectCode(r.u8())
	var err error
	m.Text, err = r.text()
	return err
}

// Marshal encodes m as one frame.
func Marshal(m Message) ([]byte, error) {
	b := []byte{byte(m.Type()), 0, 0, 0}
	b, err := m.appendBody(b)
	if err != nil {
		return nil, err
	}
	n := len(b) - 4
	if n > MaxFrameLimit {
		return nil, fmt.Errorf("pecwire: %d-byte message exceeds a frame", n)
	}
	putUint24(b[1:], n)
	return b, nil
}

// Unmarshal decodes one frame's body of type t. It never panics, whatever
// the bytes, and refuses trailing bytes.
func Unmarshal(t Type, body []byte) (Message, error) {
	var m Message
	switch t {
	case TypeRegister:
		m = new(Register)
	case TypeRegistered:
		m = new(Registered)
	case TypePing:
		m = new(Ping)
	case TypePong:
		m = new(Pong)
	case TypeSubmit:
		m = new(Submit)
	case TypeProof:
		m = new(Proof)
	case TypeReject:
		m = new(Reject)
	case TypeError:
		m = new(Error)
	case TypeServerSubmit:
		m = new(ServerSubmit)
	default:
		if m = forwardMessage(t); m == nil {
			return nil, fmt.Errorf("pecwire: unknown message type %d", t)
		}
	}
	r := &reader{b: body}
	if err := m.decodeBody(r); err != nil {
		return nil, fmt.Errorf("pecwire: %T: %w", m, err)
	}
	if r.err != nil {
		return nil, fmt.Errorf("pecwire: %T: %w", m, r.err)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("pecwire: %T: %d trailing bytes", m, len(r.b))
	}
	return m, nil
}

func durationMillis(d time.Duration) uint32 {
	ms := d.Milliseconds()
	switch {
	case ms < 0:
		return 0
	case ms > 0xffffffff:
		return 0xffffffff
	}
	return uint32(ms)
}

// clip makes s fit a message's text: at most MaxText bytes of printable
// UTF-8, control characters escaped (a cloud's reasons often wrap errors
// whose text it does not choose), so that a peer's decoder, which refuses
// them, accepts it.
func clip(s string) string {
	s = termtext.Escape(s)
	if len(s) <= MaxText {
		return s
	}
	s = s[:MaxText]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

func appendText(b []byte, s string) []byte {
	s = clip(s)
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendUint24(b []byte, n int) []byte { return append(b, byte(n>>16), byte(n>>8), byte(n)) }

func putUint24(b []byte, n int) { b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n) }

// reader decodes big-endian fields, remembering the first shortfall.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("truncated: want %d bytes, %d remain", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}
func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}
func (r *reader) u24() int {
	if v := r.take(3); v != nil {
		return int(v[0])<<16 | int(v[1])<<8 | int(v[2])
	}
	return 0
}
func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}
func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}
func (r *reader) copy(dst []byte) { copy(dst, r.take(len(dst))) }

func (r *reader) bytes(n int) []byte { return append([]byte(nil), r.take(n)...) }

func (r *reader) text() (string, error) {
	v := r.take(int(r.u16()))
	if r.err != nil {
		return "", r.err
	}
	if len(v) > MaxText {
		return "", fmt.Errorf("text of %d bytes, at most %d", len(v), MaxText)
	}
	if err := termtext.Check(string(v)); err != nil {
		return "", fmt.Errorf("text: %w", err)
	}
	return string(v), nil
}
