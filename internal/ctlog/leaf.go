package ctlog

import (
	"encoding/base64"
	"encoding/binary"
	"errors"

	"golang.org/x/mod/sumdb/note"
)

// leafIndexExtension is the static-ct-api CTExtensions holding one
// leaf_index extension: type 0, 5 bytes, a 40-bit big-endian index.
func leafIndexExtension(idx uint64) []byte {
	return []byte{0, 0, 5, byte(idx >> 32), byte(idx >> 24), byte(idx >> 16), byte(idx >> 8), byte(idx)}
}

// noteTimestamp returns the timestamp of the RFC6962NoteSignature on a
// verified note (the first signature, the log's).
func noteTimestamp(n *note.Note) (uint64, error) {
	if len(n.Sigs) == 0 {
		return 0, errors.New("ctlog: checkpoint without a verified signature")
	}
	b, err := base64.StdEncoding.DecodeString(n.Sigs[0].Base64)
	if err != nil || len(b) < 4+8 {
		return 0, errors.New("ctlog: malformed checkpoint signature")
	}
	return binary.BigEndian.Uint64(b[4:]), nil
}

// noteSignature returns the timestamp and the DigitallySigned
// TreeHeadSignature of the log's RFC6962NoteSignature on a verified note.
func noteSignature(n *note.Note) (uint64, []byte, error) {
	ts, err := noteTimestamp(n)
	if err != nil {
		return 0, nil, err
	}
	b, _ := base64.StdEncoding.DecodeString(n.Sigs[0].Base64)
	return ts, b[12:], nil
}
