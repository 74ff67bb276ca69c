package pecwire

// The privacy forwarder's messages (PEC paper §7, "Privacy Enhancements").
// A client registers with its forwarder as with a cloud (Register,
// Registered, Ping, Pong) and then asks for ephemeral identifiers
// (EphIDRequest → EphIDs). A cloud's proofs for an ephemeral identifier
// travel sealed to the client's per-connection key (SealedProof); in the
// client-only deployment the client's submission travels sealed to the
// cloud's HPKE key (SealedSubmit) through the forwarder, so that the cloud
// sees the forwarder's address and never the client's, and the forwarder
// sees the client and never the server it connects to.

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hpke"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/pec/cloudbundle"
)

// Forwarder message types.
const (
	TypeEphIDRequest Type = 16 // client → forwarder: issue ephemeral identifiers
	TypeEphIDs       Type = 17 // forwarder → client: a batch of them
	TypeSealedSubmit Type = 18 // client → forwarder → cloud: a Submit sealed to the cloud's HPKE key
	TypeSealedProof  Type = 19 // cloud → forwarder → client: an outcome sealed to the connection's key
	TypeEphIDReject  Type = 20 // forwarder or cloud → client: a use of an identifier refused
	TypeServerSealed Type = 21 // PEC server → cloud: a chain for a privacy client (client–server deployment)
)

// Bounds of the forwarder's messages.
const (
	// MaxEphID bounds an ephemeral identifier (the PEC extension's field
	// has the same bound).
	MaxEphID = 64
	// MaxEphIDBatch bounds the identifiers of one EphIDs message.
	MaxEphIDBatch = 64
	// ConnKeySize is the size of a per-connection key (AES-256).
	ConnKeySize = 32
)

// Reject code for a refused ephemeral identifier.
const (
	// RejectReused: the identifier was used already, or has expired.
	RejectReused RejectCode = 16
)

// EphIDRequest asks the forwarder for Count fresh identifiers.
type EphIDRequest struct{ Count uint8 }

// EphIDs is a batch of identifiers, each good for one connection until
// Expires (Unix seconds): the client refreshes its batch before then.
type EphIDs struct {
	Expires uint64
	IDs     [][]byte
}

// SealedSubmit carries a submission sealed to a cloud's HPKE key
// (SealEnvelope). Cloud is the pin (SPKI SHA-256) of the cloud the client
// means: a forwarder relays only to clouds it is configured with. EphID is
// the identifier the outcomes come back under; it is also bound into the
// envelope, so that neither forwarder nor anyone else can swap it.
type SealedSubmit struct {
	Cloud    [32]byte
	EphID    []byte
	Envelope []byte
}

// SealedProof is one outcome sealed to a connection's key (SealProof).
type SealedProof struct {
	EphID  []byte
	Sealed []byte
}

// EphIDReject refuses one use of an identifier: a second use, an expired or
// foreign one (RejectReused), or the cloud's refusal of a sealed
// submission, passed back under its identifier.
type EphIDReject struct {
	EphID []byte
	Code  RejectCode
	Text  string
}

// ServerSealed is a PEC server's submission for a client in privacy mode
// (client–server deployment): the privacy fields the client's PEC
// extension carried (its identifier, its per-connection key and its
// forwarder's address) beside the server's chain. The cloud seals each
// outcome to Key and sends it under EphID to the forwarder at Forwarder,
// which must be on the cloud's list of forwarders. The key protects this
// connection's proofs only, which the server may see anyway.
type ServerSealed struct {
	EphID []byte
	Key   [ConnKeySize]byte
	// Forwarder is the forwarder's address as the extension names it:
	// "quic://host:port" or "tcp://host:port".
	Forwarder string
	Submit    Submit // ClientID and Nonce zero
}

func (*ServerSealed) Type() Type { return TypeServerSealed }

func (m *ServerSealed) appendBody(b []byte) ([]byte, error) {
	b, err := appendEphID(b, m.EphID)
	if err != nil {
		return nil, err
	}
	b = append(b, m.Key[:]...)
	if len(m.Forwarder) == 0 || len(m.Forwarder) > 255 {
		return nil, fmt.Errorf("pecwire: forwarder address of %d bytes, want 1 to 255", len(m.Forwarder))
	}
	b = append(b, byte(len(m.Forwarder)))
	b = append(b, m.Forwarder...)
	s := m.Submit
	s.ClientID, s.Nonce = ClientID{}, Nonce{}
	return s.appendBody(b)
}
func (m *ServerSealed) decodeBody(r *reader) error {
	m.EphID = r.ephID()
	r.copy(m.Key[:])
	n := int(r.u8())
	if r.err == nil && n == 0 {
		return errors.New("empty forwarder address")
	}
	fwd := r.bytes(n)
	if r.err != nil {
		return r.err
	}
	for _, ch := range fwd {
		if ch <= ' ' || ch >= 0x7f {
			return errors.New("forwarder address is not printable ASCII")
		}
	}
	m.Forwarder = string(fwd)
	if err := m.Submit.decodeBody(r); err != nil {
		return err
	}
	if m.Submit.ClientID != (ClientID{}) || m.Submit.Nonce != (Nonce{}) {
		return errors.New("client identifier or nonce beside an ephemeral identifier")
	}
	return nil
}

func (*EphIDRequest) Type() Type { return TypeEphIDRequest }
func (*EphIDs) Type() Type       { return TypeEphIDs }
func (*SealedSubmit) Type() Type { return TypeSealedSubmit }
func (*SealedProof) Type() Type  { return TypeSealedProof }
func (*EphIDReject) Type() Type  { return TypeEphIDReject }

// forwardMessage returns an empty message of forwarder type t, or nil.
func forwardMessage(t Type) Message {
	switch t {
	case TypeEphIDRequest:
		return new(EphIDRequest)
	case TypeEphIDs:
		return new(EphIDs)
	case TypeSealedSubmit:
		return new(SealedSubmit)
	case TypeSealedProof:
		return new(SealedProof)
	case TypeEphIDReject:
		return new(EphIDReject)
	case TypeServerSealed:
		return new(ServerSealed)
	}
	return nil
}

func appendEphID(b, id []byte) ([]byte, error) {
	if len(id) == 0 || len(id) > MaxEphID {
		return nil, fmt.Errorf("pecwire: ephemeral identifier of %d bytes, want 1 to %d", len(id), MaxEphID)
	}
	b = append(b, byte(len(id)))
	return append(b, id...), nil
}

func (r *reader) ephID() []byte {
	n := int(r.u8())
	if r.err == nil && (n == 0 || n > MaxEphID) {
		r.err = fmt.Errorf("ephemeral identifier of %d bytes, want 1 to %d", n, MaxEphID)
		return nil
	}
	return r.bytes(n)
}

func (m *EphIDRequest) appendBody(b []byte) ([]byte, error) { return append(b, m.Count), nil }
func (m *EphIDRequest) decodeBody(r *reader) error {
	m.Count = r.u8()
	if r.err == nil && (m.Count == 0 || m.Count > MaxEphIDBatch) {
		return fmt.Errorf("asks for %d identifiers, want 1 to %d", m.Count, MaxEphIDBatch)
	}
	return nil
}

func (m *EphIDs) appendBody(b []byte) ([]byte, error) {
	if len(m.IDs) == 0 || len(m.IDs) > MaxEphIDBatch {
		return nil, fmt.Errorf("pecwire: batch of %d identifiers, want 1 to %d", len(m.IDs), MaxEphIDBatch)
	}
	b = binary.BigEndian.AppendUint64(b, m.Expires)
	b = append(b, byte(len(m.IDs)))
	var err error
	for _, id := range m.IDs {
		if b, err = appendEphID(b, id); err != nil {
			return nil, err
		}
	}
	return b, nil
}
func (m *EphIDs) decodeBody(r *reader) error {
	m.Expires = r.u64()
	n := int(r.u8())
	if r.err == nil && (n == 0 || n > MaxEphIDBatch) {
		return fmt.Errorf("batch of %d identifiers, want 1 to %d", n, MaxEphIDBatch)
	}
	for i := 0; i < n && r.err == nil; i++ {
		m.IDs = append(m.IDs, r.ephID())
	}
	return nil
}

func (m *SealedSubmit) appendBody(b []byte) ([]byte, error) {
	if len(m.Envelope) == 0 || len(m.Envelope) > MaxFrameLimit {
		return nil, fmt.Errorf("pecwire: sealed submission of %d bytes", len(m.Envelope))
	}
	b = append(b, m.Cloud[:]...)
	b, err := appendEphID(b, m.EphID)
	if err != nil {
		return nil, err
	}
	b = appendUint24(b, len(m.Envelope))
	return append(b, m.Envelope...), nil
}
func (m *SealedSubmit) decodeBody(r *reader) error {
	r.copy(m.Cloud[:])
	m.EphID = r.ephID()
	n := r.u24()
	if r.err == nil && n == 0 {
		return errors.New("empty sealed submission")
	}
	m.Envelope = r.bytes(n)
	return nil
}

func (m *SealedProof) appendBody(b []byte) ([]byte, error) {
	if len(m.Sealed) == 0 || len(m.Sealed) > MaxFrameLimit {
		return nil, fmt.Errorf("pecwire: sealed proof of %d bytes", len(m.Sealed))
	}
	b, err := appendEphID(b, m.EphID)
	if err != nil {
		return nil, err
	}
	b = appendUint24(b, len(m.Sealed))
	return append(b, m.Sealed...), nil
}
func (m *SealedProof) decodeBody(r *reader) error {
	m.EphID = r.ephID()
	n := r.u24()
	if r.err == nil && n == 0 {
		return errors.New("empty sealed proof")
	}
	m.Sealed = r.bytes(n)
	return nil
}

func (m *EphIDReject) appendBody(b []byte) ([]byte, error) {
	b, err := appendEphID(b, m.EphID)
	if err != nil {
		return nil, err
	}
	b = append(b, byte(m.Code))
	return appendText(b, m.Text), nil
}
func (m *EphIDReject) decodeBody(r *reader) error {
	m.EphID = r.ephID()
	m.Code = RejectCode(r.u8())
	var err error
	m.Text, err = r.text()
	return err
}

// Sealed proofs. A cloud seals each outcome (a Proof message's body, with
// zero client identifier and nonce: the ephemeral identifier replaces
// both), padded to its size class (pad.go), to the connection's key with
// AES-256-GCM under a fresh random nonce. The associated data binds the
// ephemeral identifier and the enhancement, so that a proof cannot be
// moved to another connection or passed off as another enhancement's:
//
//	sealed = id (uint16) ‖ nonce (12 bytes) ‖ AES-256-GCM(key, nonce, pad(body), ad)
//	ad     = "pkie pec sealed proof v2" ‖ len(EphID) (uint8) ‖ EphID ‖ id (uint16)
//
// The outcome's digest is the submission's, so the client takes only
// outcomes of the chain it saw (the identifier and the key may have been
// seen by others: they travel in the clear in a PEC extension).
//
// The enhancement identifier travels in the clear: the client needs it to
// rebuild the associated data, and which enhancements a client asks for is
// its policy, the same for every connection, not the site it connects to.

const sealedProofLabel = "pkie pec sealed proof v2"

func sealedProofAD(ephID []byte, id pkie.ID) []byte {
	ad := append([]byte(sealedProofLabel), byte(len(ephID)))
	ad = append(ad, ephID...)
	return binary.BigEndian.AppendUint16(ad, uint16(id))
}

func connAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != ConnKeySize {
		return nil, fmt.Errorf("pecwire: connection key of %d bytes, want %d", len(key), ConnKeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// SealProof seals outcome p (its ClientID and Nonce are ignored) for the
// connection with key and ephemeral identifier ephID.
func SealProof(key, ephID []byte, p *Proof) ([]byte, error) {
	aead, err := connAEAD(key)
	if err != nil {
		return nil, err
	}
	q := *p
	q.ClientID, q.Nonce = ClientID{}, Nonce{}
	body, err := q.appendBody(nil)
	if err != nil {
		return nil, err
	}
	if body, err = pad(body); err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint16(nil, uint16(p.ID))
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, body, sealedProofAD(ephID, p.ID)), nil
}

// OpenProof opens a sealed outcome for the connection with key and ephID.
// It fails for anything not sealed by a holder of key for this identifier,
// and for an outcome that names another enhancement than its header.
func OpenProof(key, ephID, sealed []byte) (*Proof, error) {
	aead, err := connAEAD(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < 2+aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("pecwire: sealed proof of %d bytes is too short", len(sealed))
	}
	id := pkie.ID(binary.BigEndian.Uint16(sealed))
	nonce := sealed[2 : 2+aead.NonceSize()]
	padded, err := aead.Open(nil, nonce, sealed[2+aead.NonceSize():], sealedProofAD(ephID, id))
	if err != nil {
		return nil, errors.New("pecwire: sealed proof does not open with this connection's key")
	}
	body, err := unpad(padded)
	if err != nil {
		return nil, fmt.Errorf("pecwire: sealed proof: %w", err)
	}
	m, err := Unmarshal(TypeProof, body)
	if err != nil {
		return nil, err
	}
	p := m.(*Proof)
	if p.ID != id {
		return nil, fmt.Errorf("pecwire: sealed proof of %s under the header of %s", p.ID, id)
	}
	return p, nil
}

// HPKE envelopes (client-only deployment with privacy). The suite is
// Oblivious HTTP's (RFC 9458) usual one, fixed:
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM. As in Oblivious
// HTTP, a header names the key and the suite, and the HPKE info binds it:
//
//	envelope  = key id (uint8) ‖ kem (uint16) ‖ kdf (uint16) ‖ aead (uint16) ‖ enc (32) ‖ ciphertext
//	info      = "pkie pec sealed submit v2" ‖ 0x00 ‖ header ‖ len(EphID) (uint8) ‖ EphID
//	plaintext = pad(connection key (32) ‖ Submit body)
//
// pad (pad.go) brings every plaintext to a size class, so that the
// envelope's length does not name the site. The Submit inside has a zero client identifier and nonce: the ephemeral
// identifier names the connection.
const (
	HPKEKEM  = cloudbundle.HPKEKEM
	HPKEKDF  = cloudbundle.HPKEKDF
	HPKEAEAD = cloudbundle.HPKEAEAD

	envelopeHeader = 7
	envelopeEnc    = 32
	hpkeLabel      = "pkie pec sealed submit v2"
)

func hpkeHeader(k *HPKEKey) []byte {
	h := []byte{k.KeyID}
	h = binary.BigEndian.AppendUint16(h, k.KEM)
	h = binary.BigEndian.AppendUint16(h, k.KDF)
	return binary.BigEndian.AppendUint16(h, k.AEAD)
}

func hpkeInfo(header, ephID []byte) []byte {
	info := append([]byte(hpkeLabel), 0)
	info = append(info, header...)
	info = append(info, byte(len(ephID)))
	return append(info, ephID...)
}

// SealEnvelope seals a submission and the connection's key to a cloud's
// HPKE key, for the connection named ephID.
func SealEnvelope(k *HPKEKey, ephID, connKey []byte, m *Submit) ([]byte, error) {
	if len(connKey) != ConnKeySize {
		return nil, fmt.Errorf("pecwire: connection key of %d bytes, want %d", len(connKey), ConnKeySize)
	}
	pk, err := k.Key()
	if err != nil {
		return nil, err
	}
	s := *m
	s.ClientID, s.Nonce = ClientID{}, Nonce{}
	pt, err := s.appendBody(append([]byte(nil), connKey...))
	if err != nil {
		return nil, err
	}
	if pt, err = pad(pt); err != nil {
		return nil, err
	}
	hdr := hpkeHeader(k)
	ct, err := hpke.Seal(pk, hpke.HKDFSHA256(), hpke.AES128GCM(), hpkeInfo(hdr, ephID), pt)
	if err != nil {
		return nil, fmt.Errorf("pecwire: hpke: %w", err)
	}
	return append(hdr, ct...), nil
}

// OpenEnvelope opens an envelope sealed for ephID with the cloud's HPKE
// private key priv (key id id). It returns the connection's key and the
// submission, or an error for anything else.
func OpenEnvelope(id uint8, priv hpke.PrivateKey, ephID, env []byte) ([]byte, *Submit, error) {
	if len(env) < envelopeHeader+envelopeEnc {
		return nil, nil, fmt.Errorf("pecwire: envelope of %d bytes is too short", len(env))
	}
	hdr := env[:envelopeHeader]
	if hdr[0] != id {
		return nil, nil, fmt.Errorf("pecwire: envelope for key %d, this cloud's is %d", hdr[0], id)
	}
	if binary.BigEndian.Uint16(hdr[1:]) != HPKEKEM || binary.BigEndian.Uint16(hdr[3:]) != HPKEKDF || binary.BigEndian.Uint16(hdr[5:]) != HPKEAEAD {
		return nil, nil, errors.New("pecwire: envelope of an unknown HPKE suite")
	}
	padded, err := hpke.Open(priv, hpke.HKDFSHA256(), hpke.AES128GCM(), hpkeInfo(hdr, ephID), env[envelopeHeader:])
	if err != nil {
		return nil, nil, errors.New("pecwire: envelope does not open with this cloud's key")
	}
	pt, err := unpad(padded)
	if err != nil {
		return nil, nil, fmt.Errorf("pecwire: envelope: %w", err)
	}
	if len(pt) < ConnKeySize {
		return nil, nil, errors.New("pecwire: envelope holds no connection key")
	}
	var s Submit
	r := &reader{b: pt[ConnKeySize:]}
	if err := s.decodeBody(r); err != nil {
		return nil, nil, fmt.Errorf("pecwire: sealed Submit: %w", err)
	}
	if r.err != nil {
		return nil, nil, fmt.Errorf("pecwire: sealed Submit: %w", r.err)
	}
	if len(r.b) != 0 {
		return nil, nil, fmt.Errorf("pecwire: sealed Submit: %d trailing bytes", len(r.b))
	}
	return pt[:ConnKeySize:ConnKeySize], &s, nil
}

// DialTCPFrom is DialTCP from a chosen local address (nil: any): a
// forwarder on a multi-homed host relays from the address clouds expect.
func DialTCPFrom(ctx context.Context, local net.Addr, addr string, tc *tls.Config) (*Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{LocalAddr: local}, Config: tc}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pecwire: tcp %s: %w", addr, err)
	}
	tcp := c.(*tls.Conn)
	return newConn(tcp, tcp.Close, tcp.CloseWrite, TCP, tcp.RemoteAddr(), 0), nil
}
