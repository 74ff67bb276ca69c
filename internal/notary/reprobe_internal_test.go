package notary

import (
	"testing"
	"time"
)

// TestRoundLimiter: one round per target per interval; a limiter full of
// targets within their interval refuses new ones rather than forgetting
// one, and makes room once intervals pass.
func TestRoundLimiter(t *testing.T) {
	var l roundLimiter
	l.init(2)
	t0 := time.Unix(1_000_000, 0)
	const iv = time.Minute
	for _, step := range []struct {
		target string
		at     time.Duration
		want   bool
	}{
		{"a", 0, true},
		{"a", time.Second, false}, // within a's interval
		{"b", time.Second, true},
		{"c", 2 * time.Second, false}, // full of targets within their interval
		{"a", iv, true},               // a's interval has passed
		{"c", iv, false},
		{"c", iv + time.Second, true},    // b's has passed: b is forgotten
		{"b", iv + 2*time.Second, false}, // full again, a and c within theirs

	} {
		if got := l.allow(step.target, t0.Add(step.at), iv); got != step.want {
			t.Fatalf("allow(%s, +%v) = %v; want %v", step.target, step.at, got, step.want)
		}
	}
}
