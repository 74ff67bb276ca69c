// Package pec is the client side of PEC ("Towards Sustainable Evolution for
// the TLS PKI", ASIA CCS 2018): a session with a PEC cloud that proves a
// server's chain for the client, and a dialer that holds application data
// back until those proofs have arrived and verified.
//
// A [Client] registers with a cloud named by a [Bundle] (the cloud's points
// of presence and the key they prove possession of), keeps the session
// alive with pings, and moves to the next point of presence or the next
// cloud when the one it uses stops answering (the PEC paper, §8.1). It
// speaks QUIC where UDP gets through and TLS over TCP where it does not,
// racing the two as browsers do. [Client.Submit] sends a chain and returns
// a [Pending] that delivers one [Outcome] per requested enhancement by the
// caller's budget.
//
// A [Dialer] is what an application uses in place of tls.Dial: it runs the
// handshake, submits the server's chain through a Client the moment it
// arrives, and returns the connection only once the required proofs have
// arrived and verified. By default it also puts the PEC TLS extension
// ([Extension]) in its ClientHello, so that a PEC server sends its chain
// to the client's cloud first.
//
// A [Listener] makes a stock crypto/tls server a PEC server: it reads each
// ClientHello, forwards the server's own chain to the cloud the extension
// names if that cloud is on its allowlist and the rate limits allow, and
// hands the connection to the TLS stack untouched.
//
// The Client verifies nothing: a cloud is an untrusted relay, and an
// Outcome's proof is only as good as its verification by the
// enhancement's [pkie.Verifier] against the trusted third party's key the
// caller pinned (the Dialer and package check do that). What the bundle's
// pin buys is a session with the cloud's operator and no one else, so a
// network attacker can neither read the chains a client submits nor forge
// the cloud's answers, and a cloud that stops answering is noticed within
// MissedPings keepalive intervals.
package pec
