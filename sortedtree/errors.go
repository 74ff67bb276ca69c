package sortedtree

import (
	"errors"
	"fmt"
)

// Errors returned by proof verification and decoding. Verify and
// UnmarshalBinary wrap them with details; test with errors.Is.
var (
	// ErrRootMismatch: the proof does not lead to the given root.
	ErrRootMismatch = errors.New("sortedtree: proof does not match the root")
	// ErrSizeMismatch: the proof is for a tree of another size.
	ErrSizeMismatch = errors.New("sortedtree: proof is for a tree of another size")
	// ErrWrongKey: the proof is about another key (a presence proof for a
	// different key, or bracketing keys that do not bracket this one).
	ErrWrongKey = errors.New("sortedtree: proof is not about this key")
	// ErrMalformed: the encoding or the proof's structure is invalid.
	ErrMalformed = errors.New("sortedtree: malformed proof")
)

// KeyOrderError reports keys that are not strictly ascending: key Index is
// not greater than key Index-1.
type KeyOrderError struct {
	Index     uint64
	Duplicate bool
}

func (e *KeyOrderError) Error() string {
	if e.Duplicate {
		return fmt.Sprintf("sortedtree: key %d duplicates key %d", e.Index, e.Index-1)
	}
	return fmt.Sprintf("sortedtree: key %d is smaller than key %d (keys not sorted)", e.Index, e.Index-1)
}

// HashMismatchError reports a stored interior hash that does not match the
// keys it covers.
type HashMismatchError struct {
	Level int
	Index uint64
}

func (e *HashMismatchError) Error() string {
	return fmt.Sprintf("sortedtree: stored hash %d at level %d does not match the keys", e.Index, e.Level)
}
