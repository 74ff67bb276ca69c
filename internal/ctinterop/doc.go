// Package ctinterop holds tests only: pkie's Certificate Transparency parts
// checked against software nobody here wrote, in make test.
//
//   - TesseraCT v0.1.1 (transparency-dev's static-ct-api log, its POSIX
//     binary, run by internal/tesseracttest) is the log pkie's follower
//     (internal/ctfollow) and mirror (internal/ctmirror) read: the mirror
//     proves presence for every chain submitted to it and absence for one
//     never submitted, the client's verifier (treeproof.VerifyCT) agrees,
//     and ctmirror.Audit rebuilds the same tree from TesseraCT's tiles.
//     Through the command line, run in-process: "pkie prover serve
//     --ct-log" mirrors TesseraCT, "pkie check --require ca,ct" trusts the
//     sites whose certificates TesseraCT logged and refuses the other, and
//     "pkie ct audit-mirror" passes an honest mirror and fails one missing
//     a key. Behind a tampering proxy, the follower refuses a data tile
//     that does not hash to TesseraCT's checkpoint and TesseraCT's own older
//     checkpoint served after a newer one, and keeps its last state. Its
//     data tiles, parsed by certificate-transparency-go's TLS decoder, are
//     the reference pkie's own parser (internal/ctwire) is held to.
//   - certificate-transparency-go v1.4.0's client submits chains to pkie's
//     log (internal/ctlog, on POSIX and on MySQL storage) and verifies the
//     SCTs (ctutil) and the RFC 6962 read API's answers; Tessera's client
//     reads pkie's tiles and verifies inclusion and consistency.
//   - A pkie log and a TesseraCT log given the same chains serve checkpoints
//     of the same size whose entries parse the same.
//   - Real SCTs end to end (TestSCTEndToEnd, on internal/sctworld): TesseraCT
//     and a pkie log, run by two operators a v3 log list names, log a local
//     CA's precertificates with add-pre-chain; "pkie check" (fetching
//     inclusion itself, and through a cloud made with "pkie cloud init" and
//     "serve"), "pkie pec get" (client-only, and client-server behind "pkie
//     pec-proxy") and check.Checker trust the certificates whose SCTs meet
//     Chrome's CT policy, embedded, in the TLS extension or in a stapled
//     OCSP response, with each SCT included; a forged SCT, an unlisted
//     log's, a lone one and none fail with the policy named; with TesseraCT
//     off the network, fetching or through a cloud that never read it, a
//     certificate is unknown, naming the log, and one a cloud showed
//     included before stays so.
//
// Where TesseraCT's binary is missing the tests that need it are skipped,
// except under CI, where they fail (internal/tesseracttest says where the
// binary is looked for and how scripts/deps.sh installs it).
package ctinterop
