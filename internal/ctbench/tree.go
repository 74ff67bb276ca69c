package ctbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/sortedtree"
)

// buildTree builds the mirror's sorted tree from the follower's keys file
// at its verified checkpoint and signs its first head (ctmirror.Update),
// recording the time from start to the head persisted and the tree file.
func buildTree(ctx context.Context, f *ctfollow.Follower, job MirrorJob, start time.Time, r *MirrorResult, progress io.Writer) error {
	dir := filepath.Join(job.Dir, "tree")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := ctmirror.GenerateKey(dir, "bench.mirror.pkie.example/ct"); err != nil {
		return err
	}
	signer, verifier, err := ctmirror.ReadKey(filepath.Join(dir, ctmirror.KeyFile))
	if err != nil {
		return err
	}
	m, err := ctmirror.Open(ctmirror.Config{
		Dir: dir, Signer: signer, Verifier: verifier, LogKey: f.Verifier(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Progress: func(p sortedtree.BuildProgress) {
			if progress != nil {
				fmt.Fprintf(progress, "mirror: tree: %v after %.1f s\n", p.Stage, p.Elapsed.Seconds())
			}
		},
	})
	if err != nil {
		return err
	}
	defer m.Close()
	st := f.State()
	h, err := m.Update(ctx, ctmirror.Snapshot{Checkpoint: st.Checkpoint, KeysPath: f.KeysPath(), KeyCount: st.KeyCount})
	if err != nil {
		return err
	}
	r.FirstHeadSeconds = time.Since(start).Seconds()
	r.TreeKeys = h.Size
	trees, err := filepath.Glob(filepath.Join(dir, "*.tree"))
	if err != nil || len(trees) != 1 {
		return fmt.Errorf("ctbench: the mirror's directory holds %d tree files, want 1", len(trees))
	}
	fi, err := os.Stat(trees[0])
	if err != nil {
		return err
	}
	r.TreeFile, r.TreeFileBytes = trees[0], fi.Size()
	return nil
}
