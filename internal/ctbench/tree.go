package ctbench

import (
	"context"
	"io"
	"time"

	"github.com/pkie/pkie/internal/ctfollow"
)

// buildTree builds the mirror's sorted tree from the follower's keys and
// signs its head. internal/ctmirror, which does this, has not landed on
// this branch yet: the result says so.
func buildTree(ctx context.Context, f *ctfollow.Follower, job MirrorJob, start time.Time, r *MirrorResult, progress io.Writer) error {
	r.Missing = "sorted tree and signed head: internal/ctmirror not merged"
	return nil
}
