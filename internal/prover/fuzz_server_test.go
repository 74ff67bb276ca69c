package prover_test

import (
	"context"
	"math/big"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	. "github.com/pkie/pkie/internal/prover"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

// FuzzProofRequest sends arbitrary query strings to the proof API of a
// synced revocation prover and a CT prover that never synced. Every answer
// must be 200 (a proof), 400 (a bad key or cert) or, for the unsynced
// prover, 503; never a panic or a 500.
func FuzzProofRequest(f *testing.F) {
	dir := f.TempDir()
	if _, err := revocation.Init(dir, "fuzz.test/revocation"); err != nil {
		f.Fatal(err)
	}
	a, err := revocation.Open(dir, revocation.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer a.Close()
	if _, err := a.AddSerials(context.Background(), []byte{1, 2, 3}, []*big.Int{big.NewInt(1), big.NewInt(2)}, "fuzz"); err != nil {
		f.Fatal(err)
	}
	rev, err := New(Config{PKIE: Revocation, Feed: a.Feed(), Verifier: a.Verifier()})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := rev.Sync(context.Background()); err != nil {
		f.Fatal(err)
	}
	// A ct mirror that never synced: its log is never asked.
	root, err := testbed.NewRootCA("Fuzz Root", testbed.ECDSAP256)
	if err != nil {
		f.Fatal(err)
	}
	logKey, err := ctlog.Init(context.Background(), filepath.Join(dir, "log"), "fuzz.test/log", ctlog.InitOptions{Roots: root.PEM()})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := ctmirror.GenerateKey(dir, "fuzz.test/mirror"); err != nil {
		f.Fatal(err)
	}
	ct, err := ctprover.OpenMirror(context.Background(), ctprover.MirrorConfig{LogURL: "http://127.0.0.1:1", LogKey: logKey,
		MirrorKeyFile: filepath.Join(dir, ctmirror.KeyFile), Dir: filepath.Join(dir, "ct")})
	if err != nil {
		f.Fatal(err)
	}
	defer ct.Close()
	h := Handler(ServerOptions{CT: ct, Revocation: rev})
	f.Add(true, "key="+strings.Repeat("ab", 32))
	f.Add(false, "key="+strings.Repeat("ab", 32))
	f.Add(true, "cert=MIIB")
	f.Add(false, "cert=MIIB&key=")
	f.Add(true, "key=%zz")
	f.Add(false, "key="+strings.Repeat("g", 64))
	f.Fuzz(func(t *testing.T, isCT bool, query string) {
		path := "/v1/revocation/proof"
		if isCT {
			path = "/v1/ct/proof"
		}
		u := &url.URL{Scheme: "http", Host: "prover", Path: path, RawQuery: query}
		req := httptest.NewRequest("GET", "http://prover/", nil)
		req.URL = u
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == 400:
		case rec.Code == 200 && !isCT:
			if _, err := treeproof.ParseResponse(rec.Body.Bytes()); err != nil {
				t.Fatalf("%s?%s: 200 with an unparseable response: %v", path, query, err)
			}
		case rec.Code == 503 && isCT:
		default:
			t.Fatalf("%s?%s: %d %s", path, query, rec.Code, rec.Body)
		}
	})
}
