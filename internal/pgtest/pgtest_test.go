package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestKillKeepsCommitted(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	s.Kill()
	c, err = pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int
	if err := c.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after kill: v=%d err=%v, want 42", v, err)
	}
}
