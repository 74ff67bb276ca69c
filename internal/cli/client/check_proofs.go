package client

import (
	"flag"
	"time"

	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/cli/command"
)

// proofFlags are "pkie check"'s flags for the proof-based sources, ct and
// revocation: where their prover is and which TTP keys are pinned.
type proofFlags struct {
	ctProver, revProver, revKey *string
	ct                          *ctFlags
	maxAge                      *time.Duration
}

func addProofFlags(fs *flag.FlagSet) *proofFlags {
	return &proofFlags{
		ctProver:  fs.String("ct-prover", "", "prover URL of the CT mirror's sorted-tree proofs (e.g. http://127.0.0.1:8093); needs --ct-key"),
		ct:        addCTFlags(fs),
		revProver: fs.String("revocation-prover", "", "prover URL for the revocation source"),
		revKey:    fs.String("revocation-key", "", "the revocation authority's pinned verifier key (or @FILE); required with --revocation-prover"),
		maxAge:    fs.Duration("proof-max-age", check.DefaultProofMaxAge, "reject signed roots older than this (bounds replay of old proofs)"),
	}
}

// sources builds the configured proof sources: ct with a log list (its
// SCTs decide; the mirror's prover, if given, judges certificates without
// SCTs) or with a mirror's prover, and revocation with its prover.
func (p *proofFlags) sources() ([]check.Source, error) {
	var out []check.Source
	if *p.ctProver != "" || p.ct.enabled() {
		c, err := p.ct.config(*p.maxAge)
		if err != nil {
			return nil, err
		}
		switch {
		case *p.ctProver != "" && c.Key == "":
			return nil, command.UsageError("--ct-prover needs --ct-key: proofs are trusted only on a pinned key")
		case *p.ctProver == "" && c.LogList == "":
			return nil, command.UsageError("--ct-key given without --ct-prover or --ct-log-list")
		}
		src, err := check.NewCTSource(check.ProofOptions{ProverURL: *p.ctProver, TTPKey: c.Key, LogKey: c.LogKey, MaxAge: c.MaxAge,
			LogList: c.LogList, LogListSignature: c.LogListSignature, LogListPublicKey: c.LogListPublicKey,
			Policy: c.Policy, Inclusion: c.Inclusion, Fetch: c.Fetch, Witnesses: c.Witnesses, WitnessQuorum: c.WitnessQuorum, MaxListAge: c.MaxListAge})
		if err != nil {
			return nil, command.UsageError("%v", err)
		}
		out = append(out, src)
	}
	if *p.revProver == "" {
		if *p.revKey != "" {
			return nil, command.UsageError("--revocation-key given without --revocation-prover")
		}
		return out, nil
	}
	if *p.revKey == "" {
		return nil, command.UsageError("--revocation-prover needs --revocation-key: proofs are trusted only on a pinned key")
	}
	k, err := command.ReadKeyArg(*p.revKey)
	if err != nil {
		return nil, command.UsageError("--revocation-key: %v", err)
	}
	src, err := check.NewRevocationSource(check.ProofOptions{ProverURL: *p.revProver, TTPKey: k, MaxAge: *p.maxAge})
	if err != nil {
		return nil, command.UsageError("%v", err)
	}
	return append(out, src), nil
}
