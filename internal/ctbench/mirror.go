package ctbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/pkie/pkie/internal/ctfollow"
)

// MirrorJob is what the mirror child process is asked to do: follow the log
// at URL from an empty state in Dir until it has verified every entry of
// the log's checkpoint, then build and sign its sorted tree.
type MirrorJob struct {
	URL         string `json:"url"`
	VerifierKey string `json:"verifier_key"`
	Dir         string `json:"dir"`
	Parallel    int    `json:"parallel"`
}

// MirrorResult is what the mirror child measured of itself.
type MirrorResult struct {
	Entries uint64 `json:"entries"`
	Keys    uint64 `json:"keys"`
	// FollowSeconds is from start to every entry verified and its keys
	// stored (ctfollow's Sync).
	FollowSeconds    float64 `json:"follow_seconds"`
	EntriesPerSecond float64 `json:"entries_per_second"`
	// FirstHeadSeconds is from start to the first signed sorted-tree head
	// persisted; zero if no tree was built.
	FirstHeadSeconds float64 `json:"first_head_seconds,omitempty"`
	TreeFile         string  `json:"tree_file,omitempty"`
	// TreeKeys is the number of distinct keys in the tree.
	TreeKeys      uint64 `json:"tree_keys,omitempty"`
	TreeFileBytes int64  `json:"tree_file_bytes,omitempty"`
	KeysFileBytes int64  `json:"keys_file_bytes"`
	// PeakRSSBytes is the child's peak resident memory (its rusage
	// maxrss), filled in by the parent.
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
	// Missing says what the mirror could not do in this build.
	Missing string `json:"missing,omitempty"`
}

// RunMirror is the mirror child's work, in the process whose memory is
// measured: ctfollow verifies the log entry by entry into its keys file,
// then the sorted tree is built and its head signed. progress gets a line
// every few seconds.
func RunMirror(ctx context.Context, job MirrorJob, progress io.Writer) (*MirrorResult, error) {
	start := time.Now()
	f, err := ctfollow.Open(ctx, ctfollow.Config{
		Kind:     ctfollow.KindStatic,
		URL:      job.URL,
		Key:      job.VerifierKey,
		Dir:      job.Dir,
		Parallel: job.Parallel,
		HTTP:     &http.Client{Timeout: time.Minute},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	last := time.Now()
	st, err := f.Sync(ctx, func(p ctfollow.Progress) {
		if progress != nil && time.Since(last) > 5*time.Second {
			last = time.Now()
			el := time.Since(start).Seconds()
			fmt.Fprintf(progress, "mirror: verified %d of %d entries, %.0f entries/s\n", p.Done, p.Total, float64(p.Done)/el)
		}
	})
	if err != nil {
		return nil, err
	}
	r := &MirrorResult{Entries: st.Size, Keys: st.KeyCount}
	r.FollowSeconds = time.Since(start).Seconds()
	r.EntriesPerSecond = float64(st.Size) / r.FollowSeconds
	if fi, err := os.Stat(f.KeysPath()); err == nil {
		r.KeysFileBytes = fi.Size()
	}
	if err := buildTree(ctx, f, job, start, r, progress); err != nil {
		return nil, err
	}
	return r, nil
}

// runMirrorChild runs argv (a pkie binary's "bench ct --mirror-child") with
// job on its stdin, and returns the result it prints with its peak RSS.
func runMirrorChild(ctx context.Context, argv []string, job MirrorJob, progress io.Writer) (*MirrorResult, error) {
	in, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	if progress != nil {
		cmd.Stderr = progress
	} else {
		cmd.Stderr = io.Discard
	}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("mirror child %v: %w", argv, err)
	}
	var r MirrorResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("mirror child printed %q: %w", out.String(), err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.PeakRSSBytes = uint64(ru.Maxrss) * 1024 // Linux reports KiB
	}
	return &r, nil
}

// MirrorChild is the child's main: it reads a MirrorJob from stdin, runs
// it, and prints the MirrorResult as JSON on stdout.
func MirrorChild(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	var job MirrorJob
	if err := json.NewDecoder(io.LimitReader(stdin, 1<<20)).Decode(&job); err != nil {
		return fmt.Errorf("mirror child: reading the job: %w", err)
	}
	r, err := RunMirror(ctx, job, stderr)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(r)
}
