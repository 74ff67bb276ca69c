package client

import (
	"flag"
	"time"

	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/cli/command"
)

// ctFlags are the ct verifier's flags, the same in pkie check, pkie check
// --cloud and pkie pec get: the log list and policy the certificate's SCTs
// are judged by, and the sorted-tree mirror that judges a certificate
// without SCTs.
type ctFlags struct {
	key, logKey            *string
	list, listSig, listKey *string
	policy, inclusion      *string
	fetch                  *bool
	witnesses              *command.StringList
	witnessQuorum          *int
	maxListAge             *time.Duration
}

func addCTFlags(fs *flag.FlagSet) *ctFlags {
	c := &ctFlags{
		key:           fs.String("ct-key", "", "the pinned verifier key (or @FILE) of the CT mirror that signs the sorted tree's heads (judges certificates without SCTs)"),
		logKey:        fs.String("ct-log-key", "", "the pinned verifier key (or @FILE) of the CT log the mirror follows (its RFC 6962 note key); required with --ct-key"),
		list:          fs.String("ct-log-list", "", "the CT log list the certificate's SCTs are checked against (Chrome's v3 JSON, or Apple's): a file or an http(s) URL; enables ct"),
		listSig:       fs.String("ct-log-list-sig", "", "the log list's detached signature (file or URL), checked with --ct-log-list-key"),
		listKey:       fs.String("ct-log-list-key", "", "the PEM file of the key that signs the log list"),
		policy:        fs.String("ct-policy", "", "the CT policy the SCTs must satisfy: chrome | apple | one (default chrome)"),
		inclusion:     fs.String("ct-inclusion", "", "required (the SCTs shown included, or promises within their logs' merge delay, must meet the policy by themselves, else ct is unknown) | optional (default required)"),
		fetch:         fs.Bool("ct-fetch", false, "fetch inclusion proofs straight from the CT logs when no cloud or prover delivered them (tells each log which certificate you check)"),
		witnesses:     new(command.StringList),
		maxListAge:    fs.Duration("ct-max-list-age", 0, "the oldest CT log list relied on (by its timestamp): older, a certificate's SCTs leave ct unknown; Chrome's limit is 1680h (70 days); default no limit"),
		witnessQuorum: fs.Int("ct-witness-quorum", 0, "how many of the --ct-witness witnesses must have cosigned a checkpoint (default all)"),
	}
	fs.Var(c.witnesses, "ct-witness", "a witness's note verifier key (or @FILE; repeatable): static-ct-api checkpoints must be cosigned by --ct-witness-quorum of them")
	return c
}

// enabled reports whether ct is configured: a log list or a mirror key.
func (c *ctFlags) enabled() bool { return *c.list != "" || *c.key != "" }

// config returns the verifier's configuration, refusing flags that do
// not go together.
func (c *ctFlags) config(maxAge time.Duration) (check.CTVerifierConfig, error) {
	cfg := check.CTVerifierConfig{LogList: *c.list, LogListSignature: *c.listSig, LogListPublicKey: *c.listKey,
		Policy: *c.policy, Inclusion: *c.inclusion, Fetch: *c.fetch, WitnessQuorum: *c.witnessQuorum, MaxListAge: *c.maxListAge, MaxAge: maxAge}
	if *c.list == "" && (*c.listSig != "" || *c.listKey != "" || *c.fetch || *c.policy != "" || *c.inclusion != "" ||
		len(*c.witnesses) > 0 || *c.witnessQuorum != 0 || *c.maxListAge != 0) {
		return cfg, command.UsageError("--ct-log-list-sig, --ct-log-list-key, --ct-policy, --ct-inclusion, --ct-fetch, --ct-witness and --ct-max-list-age need --ct-log-list")
	}
	if *c.witnessQuorum != 0 && (len(*c.witnesses) == 0 || *c.witnessQuorum < 0 || *c.witnessQuorum > len(*c.witnesses)) {
		return cfg, command.UsageError("--ct-witness-quorum %d: want 1 to the number of --ct-witness keys (%d)", *c.witnessQuorum, len(*c.witnesses))
	}
	for _, w := range *c.witnesses {
		k, err := command.ReadKeyArg(w)
		if err != nil {
			return cfg, command.UsageError("--ct-witness: %v", err)
		}
		cfg.Witnesses = append(cfg.Witnesses, k)
	}
	if (*c.listSig == "") != (*c.listKey == "") {
		return cfg, command.UsageError("--ct-log-list-sig and --ct-log-list-key go together")
	}
	switch *c.policy {
	case "", "chrome", "apple", "one":
	default:
		return cfg, command.UsageError("--ct-policy %q: want chrome, apple or one", *c.policy)
	}
	switch *c.inclusion {
	case "", "required", "optional":
	default:
		return cfg, command.UsageError("--ct-inclusion %q: want required or optional", *c.inclusion)
	}
	if *c.key != "" {
		k, err := command.ReadKeyArg(*c.key)
		if err != nil {
			return cfg, command.UsageError("--ct-key: %v", err)
		}
		if *c.logKey == "" {
			return cfg, command.UsageError("--ct-key needs --ct-log-key: the mirror's heads are trusted only bound to a checkpoint the pinned log signed")
		}
		if cfg.LogKey, err = command.ReadKeyArg(*c.logKey); err != nil {
			return cfg, command.UsageError("--ct-log-key: %v", err)
		}
		cfg.Key = k
	} else if *c.logKey != "" {
		return cfg, command.UsageError("--ct-log-key given without --ct-key")
	}
	return cfg, nil
}
