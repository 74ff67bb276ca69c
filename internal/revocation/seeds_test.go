package revocation_test

import (
	"flag"
	"math/big"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata")

// TestWriteFuzzSeeds writes testdata/issuer.der and testdata/crl.der (a
// real CRL from a testbed CA) when run with -update.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata")
	}
	ca := newCA(t, "Fuzz Seed CA")
	crl := makeCRL(t, ca, 1, big.NewInt(5), big.NewInt(99))
	if err := os.WriteFile(filepath.Join("testdata", "issuer.der"), ca.Cert.Raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "crl.der"), crl, 0o644); err != nil {
		t.Fatal(err)
	}
}
