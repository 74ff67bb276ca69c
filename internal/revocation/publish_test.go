package revocation_test

import (
	"context"
	"database/sql"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	. "github.com/pkie/pkie/internal/revocation"
)

// TestIngestBesideRepublishingServer covers concurrent handles: an ingest from a
// second handle on the directory (the CLI beside a running server) must get
// its write through while the server republishes a large tree back to back.
// A publication that holds the write lock through reading and building the
// tree starves it until its busy timeout (SQLITE_BUSY).
func TestIngestBesideRepublishingServer(t *testing.T) {
	ctx := context.Background()
	srv, dir := newAuthority(t, nil)
	kid := []byte{1, 2, 3, 4}
	// 2,000 revoked keys, inserted in one statement: AddSerials would take
	// seconds under the race detector. The keys need only be distinct.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, DBFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < 1999)
		INSERT INTO revoked (seq, key, issuer, serial, source, added) SELECT i, randomblob(32), x'01020304', x'01', 'bulk', 0 FROM n`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if p, err := srv.Publish(ctx); err != nil || p.Size != 2_000 {
		t.Fatalf("publishing the bulk keys: %+v %v", p, err)
	}
	loop, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for loop.Err() == nil {
			srv.Publish(loop)
		}
	}()
	cli, err := Open(dir, Options{})
	if err != nil {
		stop()
		wg.Wait()
		t.Fatal(err)
	}
	defer cli.Close()
	up, err := cli.AddSerials(ctx, kid, []*big.Int{big.NewInt(1_000_000)}, "cli")
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("ingest beside a republishing server: %v", err)
	}
	if up.Added != 1 || up.Size < 2_001 {
		t.Fatalf("update %+v", up)
	}
	// Whoever published last, the stored checkpoint covers the new key.
	if cp := openCP(t, srv); cp.Size != 2_001 {
		t.Fatalf("latest checkpoint covers %d keys", cp.Size)
	}
}

// TestRemoveStaleTemp: the files a publication killed half way leaves are
// removed by their exact names, and nothing else is.
func TestRemoveStaleTemp(t *testing.T) {
	a, dir := newAuthority(t, nil)
	stale := []string{"revoked.tree.tmp-0123456789ab", ".revoked.tree.tmp-0123456789ab.tmp4242", ".revocation.state.tmp-99"}
	keep := []string{"revoked.tree.tmp-mine", "revoked.tree.tmp-0123456789abc", "notes.txt", ".revoked.tree.tmp-0123456789ab.tmpx", TreeFile, StateFile, DBFile}
	for _, f := range append(stale, keep[:4]...) {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n, err := a.RemoveStaleTemp()
	if err != nil || n != len(stale) {
		t.Fatalf("removed %d (%v), want %d", n, err, len(stale))
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	for _, f := range keep {
		if i := sort.SearchStrings(left, f); i == len(left) || left[i] != f {
			t.Errorf("%s removed; left %q", f, left)
		}
	}
	for _, f := range stale {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s left", f)
		}
	}
}
