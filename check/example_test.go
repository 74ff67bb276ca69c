package check_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log"
	"time"

	fnote "github.com/transparency-dev/formats/note"

	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/checkpoint"
)

// An embedder that completed its own TLS handshake asks whether to trust the
// certificate it was shown: Forced Perspectives' converge(host, port, sha1sum).
func ExampleChecker_Converge() {
	dir, err := check.DefaultNotaryDir()
	if err != nil {
		log.Fatal(err)
	}
	notaries, err := check.LoadNotaries(dir)
	if err != nil {
		log.Fatal(err)
	}
	policy, err := check.ParsePolicy("quorum:0.75")
	if err != nil {
		log.Fatal(err)
	}
	policy.MinDuration = 24 * time.Hour
	cache, err := check.DefaultCachePath()
	if err != nil {
		log.Fatal(err)
	}
	c, err := check.New(check.Config{Notaries: notaries, Policy: policy, CachePath: cache})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ok, v, err := c.Converge(context.Background(), "bank.example", 443,
		"3A:1F:9C:00:5B:7E:21:D4:88:0C:6A:19:E2:47:B3:5D:90:CC:12:7F")
	if err != nil {
		log.Fatal(err) // malformed input or a cancelled context, not a verdict
	}
	if !ok {
		fmt.Println("refusing:", v.Result, v.Reasons)
	}
}

// An application pins the TTP keys of the built-in enhancements it checks
// and builds their verifiers, for a Config or a pec.Dialer.
func ExampleNewVerifiers() {
	// For ct: the key of the mirror that signs the sorted tree's heads,
	// and the key of the CT log it follows (its RFC 6962 note key, ECDSA
	// P-256; made here, published by the log in practice).
	_, mirrorKey, err := checkpoint.GenerateKey("mirror.example/ct")
	if err != nil {
		log.Fatal(err)
	}
	lk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	logKey, err := fnote.RFC6962VerifierString("log.example/2026", lk.Public())
	if err != nil {
		log.Fatal(err)
	}
	_, authorityKey, err := checkpoint.GenerateKey("ra.example")
	if err != nil {
		log.Fatal(err)
	}
	// A nil registry means check.BuiltinRegistry().
	verifiers, err := check.NewVerifiers(nil, map[string]json.RawMessage{
		"ct":         check.CTVerifierConfig{Key: mirrorKey, LogKey: logKey, MaxAge: 30 * time.Minute}.JSON(),
		"revocation": check.RevocationVerifierConfig{Key: authorityKey}.JSON(),
	})
	if err != nil {
		log.Fatal(err)
	}
	reg := check.BuiltinRegistry()
	for _, v := range verifiers {
		fmt.Println(reg.Name(v.ID()))
	}
	// Output:
	// ct
	// revocation
}
