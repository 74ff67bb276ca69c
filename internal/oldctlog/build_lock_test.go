package oldctlog_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/pkie/pkie/internal/oldctlog"
)

// TestAddBesideRebuildingServer: an add from a second handle on the log's
// directory (pkie log add beside a running server) must get its write
// through while the server builds the sorted tree back to back. A build
// that holds the write lock through reading the keys and writing the tree
// starves it until its busy timeout (SQLITE_BUSY).
func TestAddBesideRebuildingServer(t *testing.T) {
	ctx := context.Background()
	srv, _ := filledLog(t, 2)
	dir := srv.Dir()
	// 20,000 certificate keys, inserted in one statement: only the sorted
	// build reads them, and they need only be distinct.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, DBFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 20000)
		INSERT INTO certs (seq, key, idx, ts, chain) SELECT (SELECT MAX(seq) FROM certs) + i, randomblob(32), 0, 0, x'' FROM n`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	loop, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for loop.Err() == nil {
			srv.BuildSorted(loop)
		}
	}()
	cli, err := Open(dir, Options{})
	if err != nil {
		stop()
		wg.Wait()
		t.Fatal(err)
	}
	defer cli.Close()
	_, extra := issue(t, 1)
	_, err = cli.AddChains(ctx, extra)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("add beside a server rebuilding its sorted tree: %v", err)
	}
}
