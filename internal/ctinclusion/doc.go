// Package ctinclusion fetches and verifies the evidence that a Certificate
// Transparency log included the entry an SCT promised: an inclusion proof
// against a tree head the log signed, or that log's signed word that the
// entry is not in the tree yet.
//
// An SCT is only a promise (RFC 6962 §3): the log undertakes to include
// the entry within its maximum merge delay. What turns the promise into
// a fact is the log's own signature on a tree that holds the entry. For a
// static-ct-api log (C2SP static-ct-api) the SCT's leaf_index extension
// says where the entry is; the tree head is the log's checkpoint, a
// signed note carrying an RFC6962NoteSignature, and the audit path is read
// from its hash tiles. For an RFC 6962 log the tree head is the signed
// tree head (get-sth) and the audit path comes from get-proof-by-hash.
//
// Evidence is what travels: from the logs to a Fetcher (a PEC cloud, or a
// client that accepts telling the logs what it visits), and from a cloud
// to a client inside the ct proof body. Verify checks it against the log's
// key from the client's log list and nothing else, so a cloud that relays
// evidence cannot forge it. Evidence has four outcomes:
//
//   - Included: the log signed a tree that holds the entry at LeafIndex.
//   - NotYet: the log signed a tree that does not hold it (yet). Whether
//     that is a broken promise depends on the SCT's time, the log's
//     maximum merge delay and when the tree was signed, which the caller
//     judges with Result.CheckpointTime.
//   - Conflict: the log signed a tree that holds another entry at the
//     SCT's leaf_index: signed evidence against the SCT (*MismatchError).
//   - LookupFailed: nobody could reach the log. It carries nothing signed
//     and is never evidence against a certificate.
//
// Witnesses. A log's signature alone does not show that the tree it
// signed is the one the rest of the world sees. VerifyWith can require,
// on top of it, cosignatures from a quorum of witnesses (C2SP
// tlog-witness, tlog-cosignature: cosignature/v1 lines in the checkpoint
// note, as the log serves it). A checkpoint short of the quorum is bad
// evidence (*QuorumError), never evidence against a certificate. An
// RFC 6962 STH is not a note and cannot carry cosignatures, so with
// witnesses required an RFC 6962 log's evidence is bad evidence.
//
// Cost. A client's first Verify of a tree head costs about one ECDSA P-256
// verification (its signature) plus the audit path; a Verifier remembers
// the tree heads it verified, by their bytes, so that later evidence
// against the same checkpoint costs about the bare audit path
// (BenchmarkVerifyInclusion, BenchmarkVerifyInclusionWarm, beside
// BenchmarkECDSAP256Verify and BenchmarkBareAuditPath, on a path of 31
// hashes: a tree of two billion entries). A witness policy adds one
// Ed25519 verification per cosignature up to its quorum to a cold Verify
// and nothing to a warm one (BenchmarkVerifyInclusionWitnessed,
// BenchmarkVerifyInclusionWitnessedWarm, beside BenchmarkEd25519Verify).
//
// The Fetcher builds audit paths from hash tiles itself rather than with
// Tessera's client.ProofBuilder, which would link OpenTelemetry and klog
// into clients.
//
// The package is client code: it links no log, mirror or storage.
package ctinclusion
