package mysqltest

import (
	"context"
	"database/sql"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/tessera"
	tmysql "github.com/transparency-dev/tessera/storage/mysql"
	"golang.org/x/mod/sumdb/note"
)

func TestKillKeepsCommitted(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (v INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s.Kill()
	db, err = sql.Open("mysql", s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRowContext(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after kill: v=%d err=%v, want 42", v, err)
	}
}

// TestPortTaken starts the server on a port another listener holds: it
// fails to bind, and the harness starts it again on a free port.
func TestPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	calls := 0
	pickPort = func(t testing.TB) int {
		calls++
		if calls == 1 {
			return taken
		}
		return freePort(t)
	}
	defer func() { pickPort = freePort }()
	s := Start(t)
	if calls != 2 || s.port == taken {
		t.Fatalf("%d ports picked, server on %d (taken: %d)", calls, s.port, taken)
	}
	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
}

func TestDatabasesApart(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	other := s.NewDatabase(t)
	if other == s.DSN {
		t.Fatalf("NewDatabase returned the server's own DSN %q", other)
	}
	a, err := sql.Open("mysql", s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sql.Open("mysql", other)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.ExecContext(ctx, "CREATE TABLE t (v INT)"); err != nil {
		t.Fatal(err)
	}
	// The same table name in the other database must not exist yet.
	if _, err := b.ExecContext(ctx, "SELECT v FROM t"); err == nil {
		t.Fatalf("a table created in %s is visible in %s", s.DSN, other)
	}
}

// TestTesseraStorage runs Tessera's own MySQL storage on the server: the
// DSN must be one Tessera can apply its schema through, append to and
// publish a checkpoint from.
func TestTesseraStorage(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	schema, err := os.ReadFile(filepath.Join(moduleDir(t, "github.com/transparency-dev/tessera"), "storage", "mysql", "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", s.DSN+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(ctx, string(schema)); err != nil {
		t.Fatalf("applying Tessera's MySQL schema: %v", err)
	}
	admin.Close()

	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	driver, err := tmysql.New(ctx, db)
	if err != nil {
		t.Fatalf("tessera mysql.New: %v", err)
	}
	skey, vkey, err := note.GenerateKey(nil, "mysqltest.example/log")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	opts := tessera.NewAppendOptions().WithCheckpointSigner(signer).WithCheckpointInterval(time.Second).WithBatching(16, 50*time.Millisecond)
	appender, shutdown, reader, err := tessera.NewAppender(ctx, driver, opts)
	if err != nil {
		t.Fatalf("tessera.NewAppender: %v", err)
	}
	defer shutdown(ctx)
	awaiter := tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, 100*time.Millisecond)
	var last uint64
	for i, e := range []string{"one", "two", "three"} {
		idx, cp, err := awaiter.Await(ctx, appender.Add(ctx, tessera.NewEntry([]byte(e))))
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if idx.Index != uint64(i) {
			t.Fatalf("entry %d got index %d", i, idx.Index)
		}
		if _, err := note.Open(cp, note.VerifierList(verifier)); err != nil {
			t.Fatalf("checkpoint after entry %d does not verify: %v\n%s", i, err, cp)
		}
		last = idx.Index
	}
	size, err := reader.IntegratedSize(ctx)
	if err != nil || size != last+1 {
		t.Fatalf("integrated size %d (%v), want %d", size, err, last+1)
	}
}

// moduleDir returns the module cache directory of a module the build uses.
func moduleDir(t *testing.T, mod string) string {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	return strings.TrimSpace(string(out))
}
