package pecwire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Padding of sealed payloads. What the forwarder, and anyone on the path
// between client and forwarder or forwarder and cloud, sees of a sealed
// submission or a sealed proof is its length: unpadded, that length is the
// chain's, the server name's and the proof's, and so it names the site.
// Every sealed plaintext is therefore padded, inside the seal, to the
// smallest size class that holds it:
//
//	padded = content_len u24 ‖ content ‖ zero bytes, len(padded) = PaddedSize(3 + content_len)
//
// The classes are 2, 4, 8, 16 and 32 KiB, then 60 KiB (the largest round
// size whose sealed submission, with the longest identifier, still fits
// the default 64 KiB frame), then multiples of 64 KiB for clouds and
// forwarders that raise --max-frame. A padded plaintext has one spelling:
// it is refused unless it is exactly its content's class, with zero
// padding.
var padClasses = [...]int{2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 60 << 10}

// padStep is the size step beyond the last class.
const padStep = 64 << 10

// padHeader is the length prefix of a padded plaintext.
const padHeader = 3

// PaddedSize is the size class of a plaintext of n bytes (length prefix
// included): the smallest class that holds it.
func PaddedSize(n int) int {
	for _, c := range padClasses {
		if n <= c {
			return c
		}
	}
	return (n + padStep - 1) / padStep * padStep
}

// pad returns content with its length before it and zero bytes after it,
// to its size class.
func pad(content []byte) ([]byte, error) {
	if len(content) > MaxFrameLimit {
		return nil, fmt.Errorf("pecwire: sealed content of %d bytes", len(content))
	}
	out := make([]byte, padHeader, PaddedSize(padHeader+len(content)))
	out[0], out[1], out[2] = byte(len(content)>>16), byte(len(content)>>8), byte(len(content))
	out = append(out, content...)
	return out[:cap(out)], nil
}

// unpad returns the content of a padded plaintext, refusing one whose
// length is not its content's size class or whose padding is not zero.
// Its errors are wrapped by the caller, which names what was padded.
func unpad(b []byte) ([]byte, error) {
	if len(b) < padHeader {
		return nil, fmt.Errorf("padded plaintext of %d bytes", len(b))
	}
	n := int(binary.BigEndian.Uint32(append([]byte{0}, b[:padHeader]...)))
	if padHeader+n > len(b) {
		return nil, fmt.Errorf("padded plaintext of %d bytes says it holds %d", len(b), n)
	}
	if want := PaddedSize(padHeader + n); len(b) != want {
		return nil, fmt.Errorf("%d bytes of content padded to %d bytes, want its size class, %d", n, len(b), want)
	}
	for _, x := range b[padHeader+n:] {
		if x != 0 {
			return nil, errors.New("non-zero padding")
		}
	}
	return b[padHeader : padHeader+n : padHeader+n], nil
}

// envelopeTag is the tag of HPKE's AEAD, AES-128-GCM.
const envelopeTag = 16

// EnvelopePadded reports whether an HPKE envelope of n bytes holds a
// plaintext of a size class: what a forwarder can check without opening
// it, to refuse a client that does not pad (one older than padding, whose
// envelopes no cloud opens) with a reason instead of relaying it.
func EnvelopePadded(n int) bool {
	pt := n - envelopeHeader - envelopeEnc - envelopeTag
	return pt > 0 && PaddedSize(pt) == pt
}
