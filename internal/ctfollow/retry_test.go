package ctfollow

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRetry: a log that answers 503 a few times is retried with back-off
// and followed; one that keeps answering 503 fails the sync, state kept.
func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		ok       bool
	}{{"two 503s", 2, true}, {"always 503", 1 << 30, false}} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.grow(10)
			var mu sync.Mutex
			left := tc.failures
			fx.srv.setTamper(func(p string, b []byte) []byte {
				mu.Lock()
				defer mu.Unlock()
				if strings.HasPrefix(p, "tile/data/") && left > 0 {
					left--
					return []byte(unavailableMarker)
				}
				return b
			})
			f := fx.open(KindStatic)
			st, err := f.Sync(context.Background(), nil)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				fx.checkState(f, 10)
				return
			}
			if err == nil || st != nil || Reason(err) != "" {
				t.Fatalf("Sync = %v, %v; want a plain error", st, err)
			}
			if f.State().Size != 0 {
				t.Fatal("state moved")
			}
		})
	}
}

// TestSyncCancelled: a sync cancelled half way persists nothing and the
// keys it appended are cut; the next sync completes.
func TestSyncCancelled(t *testing.T) {
	fx := newFixture(t)
	fx.grow(100)
	f := fx.open(KindStatic)
	if _, err := f.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	keys, _ := os.ReadFile(f.KeysPath())
	fx.grow(900)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := f.Sync(ctx, func(p Progress) {
		if p.Done > 0 {
			cancel()
		}
	})
	if err == nil {
		t.Fatal("a cancelled sync succeeded")
	}
	if st := f.State(); st.Size != 100 {
		t.Fatalf("state at %d after a cancelled sync", st.Size)
	}
	if b, _ := os.ReadFile(f.KeysPath()); !bytes.Equal(b, keys) {
		t.Fatalf("keys file of %d bytes after a cancelled sync, had %d", len(b), len(keys))
	}
	if _, err := f.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	fx.checkState(f, 1000)
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{{"", 0}, {"3", 3 * time.Second}, {"0", 0}, {"-5", 0}, {"86400", maxRetryAfter}, {"Wed, 21 Oct 2026 07:28:00 GMT", 0}} {
		h := http.Header{}
		if tc.v != "" {
			h.Set("Retry-After", tc.v)
		}
		if got := retryAfter(h); got != tc.want {
			t.Errorf("Retry-After %q: wait %v, want %v", tc.v, got, tc.want)
		}
	}
}
