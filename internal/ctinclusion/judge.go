package ctinclusion

import (
	"time"

	"github.com/pkie/pkie/internal/loglist"
)

// Finding is what verified evidence shows about an SCT's entry.
type Finding uint8

// Findings.
const (
	// Shown: the entry is in a tree head the log signed.
	Shown Finding = iota + 1
	// Promised: no tree head the log signed holds the entry yet, and the
	// SCT is younger than the log's maximum merge delay: the SCT is a
	// promise still running.
	Promised
	// Unshown: nothing shows the entry either way: the lookup failed, or
	// the latest tree head, signed before the merge deadline, is read
	// after it.
	Unshown
	// Broken: the log signed, after the SCT's merge deadline, a
	// static-ct-api checkpoint that does not reach the SCT's leaf_index:
	// evidence against the SCT under the log's own key.
	Broken
)

// Judge says what r, the result of verifying evidence from log, shows
// about an SCT issued at sctTime, read at now. It is the one place the
// order is decided: a checkpoint the log signed after the deadline
// without the entry is a broken promise whatever the reader's clock says;
// otherwise a missing entry is a promise until the deadline and unshown
// after it. An RFC 6962 log's tree head proves no absence (the log only
// says it holds no such hash), so only a static-ct-api log can break a
// promise. A Conflict is never judged here: Verify returns it as a
// *MismatchError.
func Judge(r *Result, log *loglist.Log, sctTime, now time.Time) Finding {
	deadline := sctTime.Add(log.MMD)
	switch r.Status {
	case Included:
		return Shown
	case NotYet:
		if log.MMD <= 0 {
			// A list that names no merge delay sets no deadline: neither a
			// promise nor a broken one can be told.
			return Unshown
		}
		switch {
		case log.Kind == loglist.Static && r.CheckpointTime.After(deadline):
			return Broken
		case !now.After(deadline):
			return Promised
		}
	}
	return Unshown
}
