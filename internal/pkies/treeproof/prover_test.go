package treeproof_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/testbed"
)

// TestHealth: a synced mirror is healthy until its head is older than the
// maximum age, when clients would refuse its proofs.
func TestHealth(t *testing.T) {
	ctx := context.Background()
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	clk := time.Now()
	p, err := treeproof.NewProver(ctx, pkie.Revocation, pkie.ProverEnv{DataDir: t.TempDir()},
		treeproof.MirrorConfig{PKIE: prover.Revocation, URL: ttp.RevocationURL, Key: ttp.RevocationKey, MaxAge: time.Hour, Now: func() time.Time { return clk }},
		func(*pkie.ProveRequest) ([32]byte, error) { return [32]byte{}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Health(); err != nil {
		t.Fatalf("fresh mirror: %v", err)
	}
	clk = clk.Add(2 * time.Hour)
	if err := p.Health(); err == nil || !strings.Contains(err.Error(), "over the 1h0m0s maximum") {
		t.Fatalf("stale mirror: %v", err)
	}
	// A sync now refuses the authority's unchanged (stale) head and says so.
	if _, err := p.Mirror().Sync(ctx); err == nil {
		t.Fatal("a stale head was accepted")
	}
	if err := p.Health(); err == nil || !strings.Contains(err.Error(), "last sync") {
		t.Fatalf("stale mirror after a failed sync: %v", err)
	}
	if _, err := treeproof.NewProver(ctx, pkie.CT, pkie.ProverEnv{}, treeproof.MirrorConfig{PKIE: prover.CT, URL: "http://127.0.0.1:1", Key: ttp.LogKey}, nil, nil); err == nil {
		t.Error("a mirror of an unreachable log was built")
	}
}
