package ctsynth

import (
	"bytes"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	_ "embed"
	"encoding/binary"
	"fmt"
)

// The templates are real DER certificates (gen_template.go made them): an
// ECDSA P-256 issuing CA, and one RSA-2048 leaf in three forms (plain, with
// the CT poison, with an embedded SCT list). Each entry copies a template and
// overwrites its 16-byte serial and 32 bytes in the middle of its RSA modulus
// with bytes derived from the entry's index, so every certificate is distinct
// and still parses; none is signed per entry (the signature bytes are the
// template's, valid only for the template).
var (
	//go:embed template/issuer.der
	issuerDER []byte
	//go:embed template/leaf.der
	leafDER []byte
	//go:embed template/precert.der
	precertDER []byte
	//go:embed template/final.der
	finalDER []byte
)

// Entry kinds, by index modulo 4: half the log is precertificates (as in the
// Web's logs today), a quarter is the final certificate of the precertificate
// just before it (an x509 entry carrying an embedded SCT list: its key
// equals its precertificate's, as a mirror must find), a quarter is plain
// x509 certificates without SCTs.
const (
	kindPrecert = iota
	kindFinal
	kindPlain
)

func kindOf(i uint64) int {
	switch i % 4 {
	case 1:
		return kindFinal
	case 3:
		return kindPlain
	}
	return kindPrecert
}

// seedOf is the index whose serial and key an entry carries: a final
// certificate carries its precertificate's.
func seedOf(i uint64) uint64 {
	if kindOf(i) == kindFinal {
		return i - 1
	}
	return i
}

// template is one certificate with the offsets the generator overwrites.
type template struct {
	der            []byte
	serial, modulo int // offsets of the serial and of the varied modulus bytes
	tbsOff, tbsLen int // the TBSCertificate inside der
}

// The parsed templates and their issuer's hashes: set once by init from
// the embedded files, read-only after.
var (
	tmplLeaf, tmplPrecert, tmplFinal template
	issuerKeyHash                    [32]byte
	issuerFingerprint                [32]byte
)

// timestampBase is entry 0's timestamp (2026-02-01T00:00:00Z in ms); entry
// i is logged i ms later.
const timestampBase uint64 = 1769904000000

func init() {
	leaf, err := x509.ParseCertificate(leafDER)
	if err != nil {
		panic("ctsynth: leaf template: " + err.Error())
	}
	issuer, err := x509.ParseCertificate(issuerDER)
	if err != nil {
		panic("ctsynth: issuer template: " + err.Error())
	}
	issuerKeyHash = sha256.Sum256(issuer.RawSubjectPublicKeyInfo)
	issuerFingerprint = sha256.Sum256(issuerDER)
	serial := leaf.SerialNumber.Bytes()
	key, ok := leaf.PublicKey.(*rsa.PublicKey)
	if !ok {
		panic("ctsynth: leaf template's key is not RSA")
	}
	chunk := key.N.Bytes()[100:132]
	for _, t := range []struct {
		dst *template
		der []byte
	}{{&tmplLeaf, leafDER}, {&tmplPrecert, precertDER}, {&tmplFinal, finalDER}} {
		c, err := x509.ParseCertificate(t.der)
		if err != nil {
			panic("ctsynth: template: " + err.Error())
		}
		*t.dst = template{
			der:    t.der,
			serial: uniqueIndex(t.der, serial),
			modulo: uniqueIndex(t.der, chunk),
			tbsOff: bytes.Index(t.der, c.RawTBSCertificate),
			tbsLen: len(c.RawTBSCertificate),
		}
	}
}

func uniqueIndex(b, sub []byte) int {
	i := bytes.Index(b, sub)
	if i < 0 || bytes.Index(b[i+1:], sub) >= 0 {
		panic(fmt.Sprintf("ctsynth: template pattern found %d times", bytes.Count(b, sub)))
	}
	return i
}

// splitmix64 is a fixed, fast bit mixer: the varied bytes look random and are
// the same on every machine.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// vary overwrites b's serial and modulus bytes (b is a copy of t.der).
func (t *template) vary(b []byte, seed uint64) {
	s := b[t.serial : t.serial+16]
	binary.BigEndian.PutUint64(s, splitmix64(seed))
	binary.BigEndian.PutUint64(s[8:], seed) // the index itself: serials never collide
	s[0] = s[0]&0x7f | 0x01                 // positive, and no leading zero byte
	m := b[t.modulo : t.modulo+32]
	for j := range uint64(4) {
		binary.BigEndian.PutUint64(m[8*j:], splitmix64(seed<<2|j))
	}
}

// Issuer returns the DER of the issuing CA every entry's chain names.
func Issuer() []byte { return bytes.Clone(issuerDER) }

// IssuerKeyHash is SHA-256 of the issuer's SubjectPublicKeyInfo, as
// precertificate entries carry it.
func IssuerKeyHash() [32]byte { return issuerKeyHash }

// Certificate returns the DER certificate entry i logs: the x509 entry's
// certificate, or the precertificate (with its poison) of a precert entry.
func Certificate(i uint64) []byte {
	var t *template
	switch kindOf(i) {
	case kindPrecert:
		t = &tmplPrecert
	case kindFinal:
		t = &tmplFinal
	default:
		t = &tmplLeaf
	}
	b := bytes.Clone(t.der)
	t.vary(b, seedOf(i))
	return b
}

// IsPrecert reports whether entry i is a precert_entry.
func IsPrecert(i uint64) bool { return kindOf(i) == kindPrecert }

// PrecertTBS returns the TBSCertificate a precert entry i logs: its
// precertificate's, poison removed (which is the plain leaf template's TBS,
// varied the same way).
func PrecertTBS(i uint64) []byte {
	b := bytes.Clone(tmplLeaf.der)
	tmplLeaf.vary(b, seedOf(i))
	return b[tmplLeaf.tbsOff : tmplLeaf.tbsOff+tmplLeaf.tbsLen]
}

// AppendTileLeaf appends entry i's static-ct-api TileLeaf (as a data tile
// holds it) to dst, and returns the extended slice and the length of its
// TimestampedEntry prefix (what the RFC 6962 leaf hash covers).
func AppendTileLeaf(dst []byte, i uint64) ([]byte, int) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, timestampBase+i)
	seed := seedOf(i)
	switch kindOf(i) {
	case kindPrecert:
		dst = binary.BigEndian.AppendUint16(dst, 1) // precert_entry
		dst = append(dst, issuerKeyHash[:]...)
		dst = appendUint24(dst, tmplLeaf.tbsLen)
		off := len(dst)
		dst = append(dst, tmplLeaf.der[tmplLeaf.tbsOff:tmplLeaf.tbsOff+tmplLeaf.tbsLen]...)
		// The TBS inside the leaf template is varied at the same offsets
		// shifted by where the TBS starts.
		varyAt(dst[off:], tmplLeaf.serial-tmplLeaf.tbsOff, tmplLeaf.modulo-tmplLeaf.tbsOff, seed)
	default:
		t := &tmplLeaf
		if kindOf(i) == kindFinal {
			t = &tmplFinal
		}
		dst = binary.BigEndian.AppendUint16(dst, 0) // x509_entry
		dst = appendUint24(dst, len(t.der))
		off := len(dst)
		dst = append(dst, t.der...)
		t.vary(dst[off:], seed)
	}
	// CtExtensions holding static-ct-api's leaf_index extension.
	dst = append(dst, 0, 8, 0 /* leaf_index */, 0, 5, byte(i>>32), byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
	tsLen := len(dst) - start
	if kindOf(i) == kindPrecert {
		dst = appendUint24(dst, len(tmplPrecert.der))
		off := len(dst)
		dst = append(dst, tmplPrecert.der...)
		tmplPrecert.vary(dst[off:], seed)
	}
	dst = append(dst, 0, 32) // certificate_chain: the issuer's fingerprint
	dst = append(dst, issuerFingerprint[:]...)
	return dst, tsLen
}

func varyAt(b []byte, serial, modulo int, seed uint64) {
	t := template{serial: serial, modulo: modulo}
	t.vary(b, seed)
}

func appendUint24(b []byte, n int) []byte { return append(b, byte(n>>16), byte(n>>8), byte(n)) }

// LeafHash returns the RFC 6962 leaf hash of a TimestampedEntry:
// SHA-256(0x00 ‖ MerkleTreeLeaf), the MerkleTreeLeaf being version v1 and
// leaf_type timestamped_entry before the entry.
func LeafHash(timestampedEntry []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0, 0, 0})
	h.Write(timestampedEntry)
	var out [32]byte
	h.Sum(out[:0])
	return out
}
