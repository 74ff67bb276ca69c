// Package ttpstate keeps, in a small file apart from any database, the last
// checkpoint a trusted third party signed, or the last one a prover
// accepted from it.
//
// The rule it serves: a trusted party never signs a tree that does not
// extend what it signed before, and a prover never accepts one. A database
// that was deleted, truncated or restored from an old backup looks like a
// smaller (or different) tree; compared with the state file, it is refused
// instead of being signed and served as the truth.
//
// The file is JSON (docs/formats/proofs.md):
//
//	{"version": 1, "checkpoint": "<signed note>", "pending": "<signed note>"}
//
// checkpoint is the last signed checkpoint known to be committed; pending,
// optional, one about to be committed by a writer that signs before its
// commit can be known to succeed (the log). Both are the signed notes
// themselves, so a reader verifies them with the party's key and a
// corrupted file is noticed, not trusted.
package ttpstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/atomicfile"
)

// Version is the state file format version.
const Version = 1

// maxFile bounds a state file: two checkpoints and the JSON around them.
const maxFile = 2*checkpoint.MaxSize + 1024

// State is the content of a state file.
type State struct {
	Version    int    `json:"version"`
	Checkpoint string `json:"checkpoint"`
	Pending    string `json:"pending,omitempty"`
}

// Parse decodes a state file. It checks the format only, not signatures.
func Parse(b []byte) (*State, error) {
	if len(b) > maxFile {
		return nil, fmt.Errorf("ttpstate: state of %d bytes, at most %d", len(b), maxFile)
	}
	var s State
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("ttpstate: malformed state: %w", err)
	}
	if dec.More() {
		return nil, errors.New("ttpstate: malformed state: data after the object")
	}
	if s.Version != Version {
		return nil, fmt.Errorf("ttpstate: state version %d, want %d", s.Version, Version)
	}
	if s.Checkpoint == "" {
		return nil, errors.New("ttpstate: state holds no checkpoint")
	}
	return &s, nil
}

// Read reads and parses the state file at path. A missing file is an error
// wrapping os.ErrNotExist.
func Read(path string) (*State, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ttpstate: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("ttpstate: reading %s: %w", path, err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Write replaces the state file at path with s, atomically and durably
// (atomicfile.WriteFile), mode 0600.
func Write(path string, s *State) error {
	s.Version = Version
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("ttpstate: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("ttpstate: saving state: %w", err)
	}
	return nil
}

// TempPattern matches the names of the temporary files Write leaves behind
// when the process dies between creating and renaming one
// (atomicfile.TempPattern).
func TempPattern(path string) *regexp.Regexp { return atomicfile.TempPattern(path) }

// Open verifies a checkpoint kept in a state file with the party's key and
// origin, at any age: the state records history, not freshness.
func Open(msg string, v note.Verifier, origin string) (*checkpoint.Checkpoint, error) {
	const forever = 100 * 365 * 24 * time.Hour
	cp, err := checkpoint.Open([]byte(msg), v, origin, forever, forever, time.Now())
	if err != nil {
		return nil, fmt.Errorf("ttpstate: the saved checkpoint: %w", err)
	}
	return cp, nil
}

// RollbackError reports a tree that does not extend the saved checkpoint:
// smaller, or of the same size with another root.
type RollbackError struct {
	Saved, Got *checkpoint.Checkpoint
}

func (e *RollbackError) Error() string {
	if e.Got.Size < e.Saved.Size {
		return fmt.Sprintf("tree of %d entries is behind the %d last signed (root %x…, %s)",
			e.Got.Size, e.Saved.Size, e.Saved.Root[:8], e.Saved.Time.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("tree of %d entries has root %x…, but the checkpoint last signed at that size (%s) has root %x…",
		e.Got.Size, e.Got.Root[:8], e.Saved.Time.UTC().Format(time.RFC3339), e.Saved.Root[:8])
}

// CheckExtends returns a *RollbackError if got is smaller than saved, or of
// the same size with another root. A larger tree passes: whether it really
// extends saved takes the tree itself (a consistency proof, or the saved
// keys), which the caller checks where it can.
func CheckExtends(saved, got *checkpoint.Checkpoint) error {
	if got.Size < saved.Size || (got.Size == saved.Size && got.Root != saved.Root) {
		return &RollbackError{Saved: saved, Got: got}
	}
	return nil
}
