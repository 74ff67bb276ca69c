package ctfollow

import (
	"encoding/base64"
	"fmt"
)

// A refusal is a log's answer the follower does not accept. Each kind has
// its own error type so that a caller can count and report them apart
// (Config.OnRefuse names them by Reason). After any of them nothing is
// persisted: the follower keeps, and serves, its last verified state.

// CheckpointError reports a checkpoint or STH that does not verify: a bad or
// missing signature under the log's key, another origin, or a malformed
// note. The usual causes are a wrong key in the configuration or a log (or
// something in front of it) serving what its key did not sign.
type CheckpointError struct{ Err error }

func (e *CheckpointError) Error() string {
	return "ctfollow: the log's checkpoint does not verify: " + e.Err.Error()
}
func (e *CheckpointError) Unwrap() error { return e.Err }

// RollbackError reports a log whose verified checkpoint is smaller than the
// last one the follower verified: a log that lost entries, or one showing
// this follower an older view.
type RollbackError struct {
	Verified, Got uint64 // tree sizes
}

func (e *RollbackError) Error() string {
	return fmt.Sprintf("ctfollow: the log rolled back: it shows a tree of %d entries, after one of %d was verified", e.Got, e.Verified)
}

// ForkError reports a log whose new checkpoint is not an extension of the
// last verified one: a different root at the same size, or a consistency
// proof that does not verify. Both checkpoints are signed by the log's key,
// so together they are evidence against the log (or against whatever
// served the proof).
type ForkError struct {
	VerifiedSize, GotSize uint64
	VerifiedRoot, GotRoot []byte
	Err                   error // why the consistency check failed, if it was run
}

func (e *ForkError) Error() string {
	s := fmt.Sprintf("ctfollow: the log forked: its checkpoint of %d entries (root %s) is not consistent with the verified one of %d entries (root %s)",
		e.GotSize, b64(e.GotRoot), e.VerifiedSize, b64(e.VerifiedRoot))
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}
func (e *ForkError) Unwrap() error { return e.Err }

// EntriesError reports entries that do not match the verified checkpoint:
// a data tile or get-entries answer that does not parse, carries the wrong
// indices or count, or whose leaves do not hash to the checkpoint's root.
type EntriesError struct {
	Index uint64 // the first entry concerned
	Err   error
}

func (e *EntriesError) Error() string {
	return fmt.Sprintf("ctfollow: the log's entries from %d do not match its checkpoint: %v", e.Index, e.Err)
}
func (e *EntriesError) Unwrap() error { return e.Err }

// StateError reports a state directory the follower will not use: a state
// file missing beside a keys file, a corrupt state file, a keys file
// shorter than the state says, or a checkpoint the configured key does not
// verify. It is never repaired by starting over.
type StateError struct {
	Dir string
	Err error
}

func (e *StateError) Error() string {
	return fmt.Sprintf("ctfollow: state in %s refused: %v", e.Dir, e.Err)
}
func (e *StateError) Unwrap() error { return e.Err }

// Reason names the kind of refusal err is, for a metric label: one of
// "checkpoint", "rollback", "fork", "entries", or "" for an error that is
// not a refusal (a network failure, a full disk).
func Reason(err error) string {
	switch err.(type) {
	case *CheckpointError:
		return "checkpoint"
	case *RollbackError:
		return "rollback"
	case *ForkError:
		return "fork"
	case *EntriesError:
		return "entries"
	}
	return ""
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
