package pkie

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"sync"
)

// Kind describes one enhancement to a Registry: its identifier and name,
// and how to build each half from its configuration.
type Kind struct {
	ID ID
	// Name is how people and flags name it ("ct", "revocation"): lower
	// case letters, digits and dashes.
	Name string
	// Summary says in one line what a passing assertion means.
	Summary string
	// NewProver builds the server half from its configuration (JSON, the
	// enhancement's own schema). Nil for an enhancement with no prover.
	NewProver func(ctx context.Context, env ProverEnv, config json.RawMessage) (Prover, error)
	// NewVerifier builds the client half from its configuration: the TTP
	// keys the client pins and its freshness limits.
	NewVerifier func(config json.RawMessage) (Verifier, error)
}

// ProverEnv is what a host (the cloud) gives the provers it builds.
type ProverEnv struct {
	// DataDir is a directory of the prover's own for its state.
	DataDir string
	// HTTP reaches the TTPs.
	HTTP *http.Client
	// Log receives the prover's operational messages. The host has
	// already named the enhancement in it (attribute "pkie"), so the
	// prover does not add it again.
	Log *slog.Logger
	// Peers, if set, returns what other replicas of the host hold of the
	// prover's trusted third party: the signed statements (for CT and
	// revocation, sorted-tree heads) their provers last accepted, as
	// received and unverified. A prover without state of its own learns
	// from them what the party signed before, so that it does not take a
	// fork for the truth.
	Peers func(ctx context.Context) [][]byte
	// RequireHistory asks a prover of a trusted third party's signed tree
	// to serve nothing until it knows what that party signed before (its
	// own state, or Peers), instead of accepting the first tree the party
	// signs.
	RequireHistory bool
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// A Registry maps enhancement identifiers and names to their Kinds. The zero
// value is empty and ready to use; it is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	byID   map[ID]Kind
	byName map[string]ID
}

// Register adds k. An identifier or name registered twice is an error, as is
// a Kind with neither half.
func (r *Registry) Register(k Kind) error {
	if !nameRE.MatchString(k.Name) {
		return fmt.Errorf("pkie: enhancement name %q: want lower-case letters, digits and dashes, starting with a letter", k.Name)
	}
	if k.NewProver == nil && k.NewVerifier == nil {
		return fmt.Errorf("pkie: enhancement %q has neither a prover nor a verifier", k.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.byID, r.byName = map[ID]Kind{}, map[string]ID{}
	}
	if old, ok := r.byID[k.ID]; ok {
		return fmt.Errorf("pkie: identifier %s is already %q", k.ID, old.Name)
	}
	if id, ok := r.byName[k.Name]; ok {
		return fmt.Errorf("pkie: name %q is already identifier %s", k.Name, id)
	}
	r.byID[k.ID] = k
	r.byName[k.Name] = k.ID
	return nil
}

// Lookup returns the Kind registered under id.
func (r *Registry) Lookup(id ID) (Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.byID[id]
	return k, ok
}

// ByName returns the Kind registered under name, or, if name parses as an
// identifier (ParseID), under that identifier.
func (r *Registry) ByName(name string) (Kind, bool) {
	r.mu.RLock()
	id, ok := r.byName[name]
	r.mu.RUnlock()
	if !ok {
		var err error
		if id, err = ParseID(name); err != nil {
			return Kind{}, false
		}
	}
	return r.Lookup(id)
}

// Name returns the registered name of id, or its hexadecimal form.
func (r *Registry) Name(id ID) string {
	if k, ok := r.Lookup(id); ok {
		return k.Name
	}
	return id.String()
}

// Kinds returns every registered Kind in identifier order.
func (r *Registry) Kinds() []Kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ks := make([]Kind, 0, len(r.byID))
	for _, k := range r.byID {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b Kind) int { return int(a.ID) - int(b.ID) })
	return ks
}
