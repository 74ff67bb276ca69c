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
	ctProver, ctKey, ctLogKey, revProver, revKey *string
	maxAge                                       *time.Duration
}

func addProofFlags(fs *flag.FlagSet) *proofFlags {
	return &proofFlags{
		ctProver:  fs.String("ct-prover", "", "prover URL for the ct source (e.g. http://127.0.0.1:8093)"),
		ctKey:     fs.String("ct-key", "", "the pinned verifier key (or @FILE) of the CT mirror that signs the sorted tree's heads; required with --ct-prover"),
		ctLogKey:  fs.String("ct-log-key", "", "the pinned verifier key (or @FILE) of the CT log the mirror follows (its RFC 6962 note key); required with --ct-key"),
		revProver: fs.String("revocation-prover", "", "prover URL for the revocation source"),
		revKey:    fs.String("revocation-key", "", "the revocation authority's pinned verifier key (or @FILE); required with --revocation-prover"),
		maxAge:    fs.Duration("proof-max-age", check.DefaultProofMaxAge, "reject signed roots older than this (bounds replay of old proofs)"),
	}
}

// sources builds the configured proof sources.
func (p *proofFlags) sources() ([]check.Source, error) {
	var out []check.Source
	for _, s := range []struct {
		url, key, flag string
		mk             func(check.ProofOptions) (check.Source, error)
	}{
		{*p.ctProver, *p.ctKey, "ct", check.NewCTSource},
		{*p.revProver, *p.revKey, "revocation", check.NewRevocationSource},
	} {
		if s.url == "" {
			if s.key != "" {
				return nil, command.UsageError("--%s-key given without --%s-prover", s.flag, s.flag)
			}
			continue
		}
		if s.key == "" {
			return nil, command.UsageError("--%s-prover needs --%s-key: proofs are trusted only on a pinned key", s.flag, s.flag)
		}
		k, err := command.ReadKeyArg(s.key)
		if err != nil {
			return nil, command.UsageError("--%s-key: %v", s.flag, err)
		}
		o := check.ProofOptions{ProverURL: s.url, TTPKey: k, MaxAge: *p.maxAge}
		if s.flag == "ct" {
			if *p.ctLogKey == "" {
				return nil, command.UsageError("--ct-prover needs --ct-log-key: the mirror's heads are trusted only bound to a checkpoint the pinned log signed")
			}
			if o.LogKey, err = command.ReadKeyArg(*p.ctLogKey); err != nil {
				return nil, command.UsageError("--ct-log-key: %v", err)
			}
		}
		src, err := s.mk(o)
		if err != nil {
			return nil, command.UsageError("%v", err)
		}
		out = append(out, src)
	}
	return out, nil
}
