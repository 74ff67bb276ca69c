// Package ctlog is a Certificate Transparency log as the Web runs them
// today: RFC 6962 submission (add-chain, add-pre-chain, get-roots) with
// RFC 6962 v1 SCTs signed by an ECDSA P-256 key, and the C2SP
// static-ct-api read path (a checkpoint, Merkle tree tiles, data tiles and
// issuers), built on Tessera's storage (POSIX files by default, MySQL for
// a log spread over several machines).
//
// Tessera sequences entries, integrates them into the tree, writes the
// tiles and asks the log to sign checkpoints. The log adds what a CT log
// needs around that: chain validation against its accepted roots, the
// static-ct-api entry encoding (Tessera's ctonly), SCTs that carry the
// entry's leaf_index extension, the issuers the data tiles refer to by
// fingerprint, and, for RFC 6962 monitors, get-sth, get-sth-consistency,
// get-proof-by-hash and get-entries computed from the same tiles.
//
// One rule Tessera does not enforce, the log does: it never signs a tree
// that does not extend the last one it signed. The last signed checkpoint
// is kept in StateFile, apart from the storage, and written before the
// checkpoint can be published; a storage that lost entries, was replaced
// or rolled back is refused at Open instead of being served as a second
// history under the same key.
//
// pkie's sorted tree of the log's certificates is not part of the log: it
// is served beside it, under /pkie/, by whatever HandlerOptions.Extension
// the caller mounts.
package ctlog
