package pecwire

import (
	"crypto/sha256"
	"encoding/binary"
)

// Digest names one submission: the SHA-256 of everything its provers are
// given and its outcomes are addressed by. The cloud echoes it in every
// Proof and Reject of the submission, so that a client takes only the
// outcomes of what it submitted (or, for a server's submission, of the
// chain it saw), never those of a copy with the same nonce and another
// chain; and the cloud proves submissions with one digest once.
type Digest [32]byte

// Digest computes m's digest (docs/formats/pec.md, "Submission digest"):
//
//	SHA-256( client_id[4] | nonce[8] | name_len u8 | lower(server_name) |
//	         port u16 | request_count u16 |
//	         per request: id u16 | params_len u16 | params |
//	         chain_count u8 | per certificate: cert_len u32 | cert )
//
// where lower maps ASCII A–Z to a–z and leaves every other byte, the
// budget is left out (a resubmission with what is left of it is the same
// submission), and requests and certificates are in the order submitted.
func (m *Submit) Digest() Digest {
	h := sha256.New()
	var b []byte
	b = append(b, m.ClientID[:]...)
	b = append(b, m.Nonce[:]...)
	b = append(b, byte(len(m.ServerName)))
	for i := 0; i < len(m.ServerName); i++ {
		c := m.ServerName[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	b = binary.BigEndian.AppendUint16(b, m.Port)
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.Requests)))
	for _, r := range m.Requests {
		b = binary.BigEndian.AppendUint16(b, uint16(r.ID))
		b = binary.BigEndian.AppendUint16(b, uint16(len(r.Params)))
		b = append(b, r.Params...)
	}
	b = append(b, byte(len(m.Chain)))
	h.Write(b)
	for _, c := range m.Chain {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(c))))
		h.Write(c)
	}
	var d Digest
	h.Sum(d[:0])
	return d
}
