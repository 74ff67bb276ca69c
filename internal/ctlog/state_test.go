package ctlog

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	f_log "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/rfc6962"
)

// TestSignerPacing: the checkpoint signer signs no sooner than its spacing
// after its previous signature, waiting for the rest, and never waits
// otherwise. The clock is fake: the test asserts which waits are asked
// for, not how long anything takes.
func TestSignerPacing(t *testing.T) {
	const spacing = 200 * time.Millisecond
	for _, tc := range []struct {
		name    string
		spacing time.Duration
		// gaps are the times between one signature and the next call;
		// waits the waits the signer must ask for at each call.
		gaps, waits []time.Duration
	}{
		{"first signature", spacing, []time.Duration{0}, []time.Duration{0}},
		{"too soon", spacing, []time.Duration{0, 30 * time.Millisecond}, []time.Duration{0, 170 * time.Millisecond}},
		{"just too soon", spacing, []time.Duration{0, 199 * time.Millisecond}, []time.Duration{0, time.Millisecond}},
		{"at the spacing", spacing, []time.Duration{0, spacing}, []time.Duration{0, 0}},
		{"late", spacing, []time.Duration{0, time.Second, 0}, []time.Duration{0, 0, spacing}},
		{"no spacing", 0, []time.Duration{0, 0, time.Millisecond}, []time.Duration{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
			var slept time.Duration
			g := newTestSigner(t, tc.spacing, func() time.Time { return now }, func(d time.Duration) { slept += d; now = now.Add(d) })
			empty := rfc6962.DefaultHasher.EmptyRoot()
			var lastTS uint64
			for i, gap := range tc.gaps {
				now = now.Add(gap)
				slept = 0
				// The empty tree, again and again: it extends itself.
				if _, err := g.Sign((&f_log.Checkpoint{Origin: testOrigin, Hash: empty}).Marshal()); err != nil {
					t.Fatal(err)
				}
				if slept != tc.waits[i] {
					t.Errorf("signature %d, %v after the previous: waited %v, want %v", i, gap, slept, tc.waits[i])
				}
				if i > 0 && tc.spacing > 0 && g.last.ts-lastTS < uint64(tc.spacing.Milliseconds()) {
					t.Errorf("signature %d: timestamp %d ms after the previous one, spacing %v", i, g.last.ts-lastTS, tc.spacing)
				}
				lastTS = g.last.ts
			}
		})
	}
}

// newTestSigner returns a guardedSigner whose last signed tree is the
// empty one, on a fake clock.
func newTestSigner(t *testing.T, spacing time.Duration, clock func() time.Time, sleep func(time.Duration)) *guardedSigner {
	t.Helper()
	cs, err := newCheckpointSigner(newKey(t), testOrigin, func() uint64 { return uint64(clock().UnixMilli()) })
	if err != nil {
		t.Fatal(err)
	}
	g := &guardedSigner{cs: cs, path: filepath.Join(t.TempDir(), StateFile), spacing: spacing, clock: clock, sleep: sleep}
	copy(g.last.root[:], rfc6962.DefaultHasher.EmptyRoot())
	return g
}

// TestOpenPacesPOSIXCheckpoints: on POSIX storage the signer paces
// checkpoints to the log's interval (Tessera's publisher running at half
// of it), unless half the interval is below Tessera's minimum.
func TestOpenPacesPOSIXCheckpoints(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		interval, spacing time.Duration
	}{
		{0, 200 * time.Millisecond}, // the default
		{time.Second, time.Second},
		{200 * time.Millisecond, 200 * time.Millisecond},
		{150 * time.Millisecond, 0},
		{100 * time.Millisecond, 0},
	} {
		l, err := Open(context.Background(), initLog(t, p), Options{CheckpointInterval: tc.interval})
		if err != nil {
			t.Fatal(err)
		}
		if l.signer.spacing != tc.spacing {
			t.Errorf("CheckpointInterval %v: the signer's spacing is %v, want %v", tc.interval, l.signer.spacing, tc.spacing)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
