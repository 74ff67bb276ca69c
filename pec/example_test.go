package pec_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strings"

	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/pec"
)

// An application fetches a page through the PEC dialer: the server's chain
// goes to the cloud during the handshake, and the request leaves only once
// the CT, revocation and notary proofs verified. A revoked site is refused
// before any request is sent.
func ExampleDialer() {
	// A CT log, a revocation authority, a PEC cloud and two sites on
	// loopback (example_world_test.go). What follows is what an
	// application writes, with public packages only.
	w := startExampleWorld()
	defer w.close()
	ctx := context.Background()

	cloud, err := pec.Dial(ctx, pec.ClientConfig{Clouds: []*pec.Bundle{w.bundle}})
	if err != nil {
		log.Fatal(err)
	}
	defer cloud.Close()

	// The TTP keys are the client's own pins (for ct, the mirror that
	// signs the sorted tree's heads and the log it follows); the cloud's notary key comes
	// with its bundle. A nil registry means the built-in enhancements
	// (check.BuiltinRegistry, to which an application may add its own).
	verifiers, err := check.NewVerifiers(nil, map[string]json.RawMessage{
		"ct":         check.CTVerifierConfig{Key: w.mirrorKey, LogKey: w.logKey}.JSON(),
		"revocation": check.RevocationVerifierConfig{Key: w.revocationKey}.JSON(),
	})
	if err != nil {
		log.Fatal(err)
	}
	notaryVs, _, err := pec.BundleVerifiers(nil, []*pec.Bundle{w.bundle})
	if err != nil {
		log.Fatal(err)
	}
	d := &pec.Dialer{
		Cloud:     cloud,
		Verifiers: append(verifiers, notaryVs...),
		TLSConfig: &tls.Config{RootCAs: w.roots},
		NetDial:   w.dial, // the example's names live on loopback
	}

	client := &http.Client{Transport: &http.Transport{DialTLSContext: d.DialContext}}
	resp, err := client.Get(w.url("good.test"))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("good.test:", resp.Status)

	_, err = client.Get(w.url("revoked.test"))
	var refused *pec.VerdictError
	if errors.As(err, &refused) {
		a, _ := refused.Verdict.Source("revocation")
		fmt.Println("revoked.test:", refused.Verdict.Result, "-", a.Source, a.Status, strings.HasPrefix(a.Detail, "revoked"))
	}
	// Output:
	// good.test: 200 OK
	// revoked.test: untrusted - revocation fail true
}
