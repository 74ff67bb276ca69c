package pecbench

import (
	"context"
	"fmt"
	"io"

	"github.com/pkie/pkie/internal/proofbench"
)

// The PEC paper's scales (§6.1, Tables 1 and 2): its CT log's 2,129,920
// certificates and its CRL's 53,164 revoked serials.
const (
	PaperCTLeaves      = 2129920
	PaperRevokedLeaves = 53164
)

// Paper figures for a client's verification of one proof, every time,
// signature check included (averages): Table 1 (CT, 2,129,920
// certificates) 189 µs for a presence proof and 237 µs for an absence
// proof; Table 2 (revocation, 53,164 serials) 167 and 207 µs. The common
// case is a CT presence and a revocation absence proof: 396 µs per
// connection.
const (
	PaperCTPresenceUs  = 189
	PaperCTAbsenceUs   = 237
	PaperRevPresenceUs = 167
	PaperRevAbsenceUs  = 207
)

// ClientCost is what a client pays per connection to verify the common
// case's evidence: a CT presence proof and a revocation absence proof.
//
// The tree-level figures come from internal/proofbench at the paper's
// scales: Warm is decoding and checking both audit paths against roots
// already trusted (a client that verified each signed head once, by its
// bytes, and meets the same bytes again); Cold opens both signed heads
// every time (two Ed25519 verifications each: the head and the log
// checkpoint it is bound to), as the paper's client did; Ceiling is the
// bare SHA-256 work of the two paths. Each is the sum of the two proofs'
// medians.
//
// The verifier-level figures time the client's real verifiers (the
// built-in ct and revocation enhancements behind pkie.Verifier) on proofs
// the cloud delivered in the same run: warm reuses one verifier, so its
// head cache holds the heads; cold builds a fresh verifier per connection.
// Their trees are the bench's own, shallower than the paper's (depths in
// VerifierDepths).
type ClientCost struct {
	CTLeaves      uint64  `json:"ct_leaves"`
	RevokedLeaves uint64  `json:"revoked_leaves"`
	CTDepth       int     `json:"ct_depth"`
	RevokedDepth  int     `json:"revoked_depth"`
	WarmUsP50     float64 `json:"warm_us_p50"`
	ColdUsP50     float64 `json:"cold_us_p50"`
	CeilingUsP50  float64 `json:"ceiling_sha256_us_p50"`
	// WarmOverCeiling is how many times the bare hashing the warm path
	// costs.
	WarmOverCeiling float64 `json:"warm_over_ceiling"`
	Ed25519UsP50    float64 `json:"ed25519_verify_us_p50"`
	// Proof sizes per connection, without heads.
	ProofBytes float64 `json:"proof_bytes_avg"`
	HeadBytes  int     `json:"head_bytes"`

	Verifier *VerifierCost `json:"verifier,omitempty"`

	// The paper's averages (Tables 1 and 2), every time: the CT presence
	// proof, the revocation absence proof, and their sum per connection.
	PaperCTPresenceUs float64 `json:"paper_ct_presence_us"`
	PaperRevAbsenceUs float64 `json:"paper_revocation_absence_us"`
	PaperConnectionUs float64 `json:"paper_connection_us"`

	CT      *proofbench.Result `json:"ct_tree"`
	Revoked *proofbench.Result `json:"revocation_tree"`
}

// VerifierCost is the per-connection time of the client's verifiers, both
// proofs of one connection verified in sequence.
type VerifierCost struct {
	Samples   int     `json:"samples"`
	WarmUsP50 float64 `json:"warm_us_p50"`
	WarmUsP99 float64 `json:"warm_us_p99"`
	ColdUsP50 float64 `json:"cold_us_p50"`
	ColdUsP99 float64 `json:"cold_us_p99"`
	// Depths of the bench's trees' audit paths (CT, revocation).
	Depths [2]int `json:"depths"`
}

// treeCost runs proofbench at the two scales and sums per connection.
func treeCost(ctx context.Context, ctLeaves, revLeaves uint64, samples int, dir string, progress io.Writer) (*ClientCost, error) {
	cfg := proofbench.Config{Samples: samples, Dir: dir, Seed: 1, Log: prefixed(progress, "client cost: ")}
	cfg.Leaves, cfg.Origin = ctLeaves, "pkie.example/log"
	ct, err := proofbench.Run(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pecbench: CT-scale tree: %w", err)
	}
	cfg.Leaves, cfg.Origin = revLeaves, "pkie.example/revocation"
	rev, err := proofbench.Run(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pecbench: revocation-scale tree: %w", err)
	}
	c := &ClientCost{
		CTLeaves: ctLeaves, RevokedLeaves: revLeaves, CTDepth: ct.Depth, RevokedDepth: rev.Depth,
		// The common case: the certificate is in the log, its key is
		// not among the revoked.
		WarmUsP50:         ct.VerifyPresenceUsP50 + rev.VerifyAbsenceUsP50,
		ColdUsP50:         ct.VerifyPresenceHeadUsP50 + rev.VerifyAbsenceHeadUsP50,
		CeilingUsP50:      ct.CeilingPathUsP50 + rev.CeilingPathUsP50,
		Ed25519UsP50:      ct.CeilingEd25519UsP50,
		ProofBytes:        ct.PresenceBytesAvg + rev.AbsenceBytesAvg,
		HeadBytes:         ct.HeadBytes,
		PaperCTPresenceUs: PaperCTPresenceUs, PaperRevAbsenceUs: PaperRevAbsenceUs, PaperConnectionUs: PaperCTPresenceUs + PaperRevAbsenceUs,
		CT: ct, Revoked: rev,
	}
	if c.CeilingUsP50 > 0 {
		c.WarmOverCeiling = c.WarmUsP50 / c.CeilingUsP50
	}
	return c, nil
}

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := fmt.Fprintf(p.w, "%s%s", p.prefix, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func prefixed(w io.Writer, prefix string) io.Writer {
	if w == nil {
		return nil
	}
	return prefixWriter{w, prefix}
}
