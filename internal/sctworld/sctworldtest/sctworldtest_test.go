package sctworldtest

import (
	"testing"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/ctutil"
	cttls "github.com/google/certificate-transparency-go/tls"
	ctx509 "github.com/google/certificate-transparency-go/x509"

	"github.com/pkie/pkie/internal/sctworld"
)

// TestStart holds the world's embedded SCTs, TesseraCT's and pkie's log's,
// to certificate-transparency-go's verdict (ctutil.VerifySCT): every SCT
// of the good site verifies with its log's key, the forged one does not.
func TestStart(t *testing.T) {
	w := Start(t)
	keys := map[[32]byte]*sctworld.Log{}
	for _, l := range w.Logs {
		keys[l.ID] = l
	}
	for _, tc := range []struct {
		site  string
		valid []bool
	}{
		{sctworld.Good, []bool{true, true}},
		{sctworld.Forged, []bool{true, false}},
		{sctworld.Unlisted, []bool{true, true}},
		{sctworld.OneSCT, []bool{true}},
	} {
		s := w.Site(tc.site)
		var chain []*ctx509.Certificate
		for _, der := range s.Leaf.Chain {
			c, err := ctx509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			chain = append(chain, c)
		}
		if len(chain[0].SCTList.SCTList) != len(tc.valid) {
			t.Fatalf("%s: %d embedded SCTs, want %d", tc.site, len(chain[0].SCTList.SCTList), len(tc.valid))
		}
		for i, raw := range chain[0].SCTList.SCTList {
			var sct ct.SignedCertificateTimestamp
			if _, err := cttls.Unmarshal(raw.Val, &sct); err != nil {
				t.Fatalf("%s: SCT %d: %v", tc.site, i, err)
			}
			l := keys[sct.LogID.KeyID]
			if l == nil {
				t.Fatalf("%s: SCT %d from unknown log %x", tc.site, i, sct.LogID.KeyID)
			}
			err := ctutil.VerifySCT(l.Key, chain, &sct, true)
			if (err == nil) != tc.valid[i] {
				t.Errorf("%s: SCT %d from %s: ctutil.VerifySCT = %v, want valid %v", tc.site, i, l.Description, err, tc.valid[i])
			}
		}
	}
}
