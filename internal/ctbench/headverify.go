package ctbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/sortedtree"
)

// HeadVerify is what a CT client that has cached nothing pays per
// connection against the mirror this run built: open the mirror's signed
// head (its Ed25519 signature, and the log's ECDSA P-256 signature on the
// static-ct-api checkpoint it is bound to, checkpoint.OpenMirrorHead), then
// decode and verify the proof against the head's root. Generation is the
// mirror's Prove (the proof encoded, as a prover serves it), timed once
// the reopened tree is ready (ctmirror.Mirror.Ready: its background fill
// done), as proofbench's figures are. Microseconds, p50 over Samples
// present and as many absent keys.
type HeadVerify struct {
	Samples             int     `json:"samples"`
	HeadBytes           int     `json:"head_bytes"`
	ProvePresenceUsP50  float64 `json:"prove_presence_us_p50"`
	ProveAbsenceUsP50   float64 `json:"prove_absence_us_p50"`
	VerifyPresenceUsP50 float64 `json:"verify_presence_us_p50"`
	VerifyAbsenceUsP50  float64 `json:"verify_absence_us_p50"`
	// CeilingUsP50 is the p50 of one Ed25519 plus one ECDSA P-256
	// verification, measured in the same run: the head's two signatures.
	CeilingUsP50 float64 `json:"ceiling_two_signatures_us_p50"`
	// Ratio is the worse verify p50 over the ceiling.
	Ratio float64 `json:"ratio"`
}

// measureHeadVerify reopens the mirror the child left in dir (without
// rebuilding) and times its proofs as a client checks them.
func measureHeadVerify(ctx context.Context, dir, treeFile, logVKey string, samples int, ed, ec float64) (*HeadVerify, error) {
	signer, headV, err := ctmirror.ReadKey(filepath.Join(dir, ctmirror.KeyFile))
	if err != nil {
		return nil, err
	}
	logV, err := checkpoint.NewLogVerifier(logVKey)
	if err != nil {
		return nil, err
	}
	m, err := ctmirror.Open(ctmirror.Config{Dir: dir, Signer: signer, Verifier: headV, LogKey: logV, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	msg, _ := m.Head()
	t, err := sortedtree.Open(treeFile)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	// Time a ready tree, as a prover serves after its warm-up: both
	// trees fill their low levels in the background after opening.
	for _, ready := range []<-chan struct{}{m.Ready(), t.Ready()} {
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	hv := &HeadVerify{Samples: samples, HeadBytes: len(msg), CeilingUsP50: ed + ec}
	for _, present := range []bool{true, false} {
		gen := make([]time.Duration, 0, samples)
		ver := make([]time.Duration, 0, samples)
		for range samples {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var k [32]byte
			if present {
				k = t.Key(rng.Uint64N(t.Size()))
			} else {
				for {
					for j := range 4 {
						v := rng.Uint64()
						for b := range 8 {
							k[8*j+b] = byte(v >> (8 * b))
						}
					}
					if !t.Contains(k) {
						break
					}
				}
			}
			t0 := time.Now()
			resp, err := m.Prove(k)
			gen = append(gen, time.Since(t0))
			if err != nil {
				return nil, err
			}
			t0 = time.Now()
			h, err := checkpoint.OpenMirrorHead(msg, headV, logV, 24*time.Hour, time.Minute, time.Now())
			var got bool
			if err == nil {
				var p sortedtree.Proof
				if err = p.UnmarshalBinary(resp.Proof); err == nil {
					got, err = p.Verify(k, h.Size, h.Root)
				}
			}
			ver = append(ver, time.Since(t0))
			if err != nil || got != present {
				return nil, fmt.Errorf("ctbench: the mirror's proof for %x does not verify (present %v): %v", k[:8], got, err)
			}
		}
		g, v := quantile(durationsUs(gen), 0.5), quantile(durationsUs(ver), 0.5)
		if present {
			hv.ProvePresenceUsP50, hv.VerifyPresenceUsP50 = g, v
		} else {
			hv.ProveAbsenceUsP50, hv.VerifyAbsenceUsP50 = g, v
		}
	}
	hv.Ratio = max(hv.VerifyPresenceUsP50, hv.VerifyAbsenceUsP50) / hv.CeilingUsP50
	return hv, nil
}
