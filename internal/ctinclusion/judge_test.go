package ctinclusion

import (
	"testing"
	"time"

	"github.com/pkie/pkie/internal/loglist"
)

// TestJudge: what verified evidence shows, in the one order the verifier
// and pkie ct check share.
func TestJudge(t *testing.T) {
	sctTime := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	static := &loglist.Log{Kind: loglist.Static, MMD: 24 * time.Hour}
	rfc := &loglist.Log{Kind: loglist.RFC6962, MMD: 24 * time.Hour}
	before, after := sctTime.Add(time.Hour), sctTime.Add(25*time.Hour)
	for _, tc := range []struct {
		name string
		log  *loglist.Log
		r    Result
		now  time.Time
		want Finding
	}{
		{"included", static, Result{Status: Included, CheckpointTime: before}, after, Shown},
		{"not yet, within the merge delay", static, Result{Status: NotYet, CheckpointTime: before}, before, Promised},
		{"not yet, read after the deadline, signed before it", static, Result{Status: NotYet, CheckpointTime: before}, after, Unshown},
		{"static checkpoint signed after the deadline without it", static, Result{Status: NotYet, CheckpointTime: after}, after, Broken},
		{"an RFC 6962 tree head proves no absence", rfc, Result{Status: NotYet, CheckpointTime: after}, after, Unshown},
		{"a clock behind the checkpoint does not excuse it", static, Result{Status: NotYet, CheckpointTime: after}, before, Broken},
		{"lookup failed", static, Result{Status: LookupFailed}, before, Unshown},
		{"no merge delay in the list: no deadline to break", &loglist.Log{Kind: loglist.Static}, Result{Status: NotYet, CheckpointTime: after}, after, Unshown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Judge(&tc.r, tc.log, sctTime, tc.now); got != tc.want {
				t.Errorf("Judge = %d, want %d", got, tc.want)
			}
		})
	}
}
