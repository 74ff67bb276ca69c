// Package consensus is the client side of the multi-path notary system: it
// reads Convergence notary bundles, asks notaries whether they see the same
// certificate a client saw, verifies every signed answer against the
// notary's pinned bundle certificate, and turns the answers into one result
// under a policy. It also keeps the client's local cache of accepted
// certificates.
//
// A notary is asked over one of two wire APIs. The Convergence API
// (SHA-1 fingerprints, SHA1withRSA by the bundle certificate's key) is
// what every Convergence notary speaks. pkie's v1 API (SHA-256, an SNI
// name apart from the host, Ed25519-signed answers that carry when they
// were signed and when the certificate was observed) is used when the
// bundle pins the notary's v1 key (pkie_v1_ed25519); VerifyV1 checks such
// an answer's signature against that pinned key before reading it, then
// that it is about the target asked and fresh. Client.API forces one API.
//
// A notary is one vote however many replica hosts its bundle lists. Each
// answer is a Vote:
//
//   - yes: the notary answered 200 with a correctly signed history listing
//     the client's fingerprint among its current observations, the entries
//     with the newest finish (Convergence), or a verified, fresh v1 answer
//     about the target with "match": true;
//   - no: the notary answered 409 with a correctly signed history, or 200
//     with one listing the client's fingerprint only in entries another
//     certificate has superseded (Convergence), or a verified, fresh v1
//     answer with "match": false;
//   - stand aside: anything else (unreachable, timed out, 503 because the
//     notary could not reach the target or is overloaded, 400, an answer
//     whose signature or body does not verify, a v1 answer about another
//     target, an answer that is stale or dated in the future: a v1 answer
//     by its signed_at and observed_at, a Convergence answer by the newest
//     finish in its signed history). A notary that stands aside
//     does not vote, unless the policy sets UnreachableIsFailure, which turns
//     every stand-aside into a no.
//
// Policies (see Policy.Decide for the exact rule):
//
//   - consensus: every notary that voted said yes;
//   - majority (the default): more than half of those that voted said yes;
//   - minority: at least one said yes;
//   - quorum:Q: at least ceil(Q × configured notaries) said yes. As in
//     Perspectives the denominator is the number of notaries configured, not
//     the number that answered, so an unreachable notary cannot lower the
//     bar; if the quorum could still have been met had the notaries standing
//     aside said yes, the result is inconclusive rather than untrusted.
//
// Any policy may carry a minimum observation duration (Perspectives'
// quorum duration): a yes counts only if the notary's signed history shows
// the fingerprint observed for at least that long. A result that fails only
// because some yes votes are too young is inconclusive, not untrusted: a
// freshly renewed certificate is not evidence of an attack. When no notary
// votes at all, the result is inconclusive.
package consensus
