package pkie

import "context"

// requesterKey is the context key of WithRequester.
type requesterKey struct{}

// WithRequester returns a copy of ctx naming who asked for the proofs made
// under it: the share of the host's bounds the request counts against. The
// PEC cloud names the submitter's address (its IP, or its /64 for IPv6), as
// its own per-address shares do. A prover that bounds work of its own, as
// the notary bounds its probes, gives each requester a share of it, so
// that one submitter cannot take every slot from the others.
func WithRequester(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, requesterKey{}, key)
}

// Requester returns the requester WithRequester put in ctx, or "" when
// there is none (a prover called directly, not through a host).
func Requester(ctx context.Context) string {
	s, _ := ctx.Value(requesterKey{}).(string)
	return s
}
