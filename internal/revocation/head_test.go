package revocation_test

import (
	"context"
	"database/sql"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	. "github.com/pkie/pkie/internal/revocation"
	"github.com/pkie/pkie/internal/ttpstate"
	"github.com/pkie/pkie/sortedtree"
)

// TestPublishesHeads: what the authority publishes is a sorted-tree head,
// not a checkpoint (no checkpoint parser takes it), under its own origin
// and key name, bound to a checkpoint of the key log signed by the
// authority's key whose root is the RFC 6962 root of the feed's keys in
// publication order; successive heads of different trees all verify.
func TestPublishesHeads(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t, nil)
	kid := []byte("issuer key id, twenty")
	var prev *checkpoint.Head
	for i, serials := range [][]int64{{5, 1}, {3}, {9, 2, 7}} {
		var bs []*big.Int
		for _, s := range serials {
			bs = append(bs, big.NewInt(s))
		}
		if _, err := a.AddSerials(ctx, kid, bs, "t"); err != nil {
			t.Fatal(err)
		}
		msg, err := a.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		text := string(msg[:strings.Index(string(msg), "\n\n")+1])
		if _, err := checkpoint.Parse([]byte(text)); err == nil {
			t.Fatalf("publication %d parses as a checkpoint:\n%s", i, text)
		}
		if _, err := checkpoint.Open(msg, a.Verifier(), a.Origin(), time.Hour, time.Minute, time.Now()); err == nil {
			t.Fatalf("publication %d opens as a checkpoint of the authority's origin", i)
		}
		h := openCP(t, a)
		if h.Origin != a.HeadOrigin() || h.Origin != a.Origin()+"/sorted" {
			t.Fatalf("head origin %q", h.Origin)
		}
		keys, err := a.Feed().Keys(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if h.Log.Origin != a.Origin() || h.Log.Size != uint64(len(keys)) || h.Log.Root != sortedtree.ListRoot(keys) || h.Size != h.Log.Size {
			t.Fatalf("publication %d: head %d keys bound to %s at %d (root %x), feed holds %d keys (root %x)",
				i, h.Size, h.Log.Origin, h.Log.Size, h.Log.Root, len(keys), sortedtree.ListRoot(keys))
		}
		if prev != nil && prev.Root == h.Root {
			t.Fatal("a new revocation left the root unchanged")
		}
		prev = h
	}
}

// TestRefusesReorderedKeyLog: a database holding the signed key set in
// another order (the sorted tree is the same, the key log is not) is behind
// what was signed: provers that synced the feed would see it rewritten.
func TestRefusesReorderedKeyLog(t *testing.T) {
	dir, _ := revokedAuthority(t)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE revoked SET seq = 100 WHERE seq = 0`, `UPDATE revoked SET seq = 0 WHERE seq = 1`, `UPDATE revoked SET seq = 1 WHERE seq = 100`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrBehind) || !strings.Contains(err.Error(), "in publication order") {
		t.Fatalf("Open of a reordered key log: %v, want ErrBehind naming the publication order", err)
	}
}

// TestLegacyState: an authority whose state file and database hold
// sorted-tree roots signed as checkpoints (before heads had their own type)
// opens once, saying so, and its next publication replaces them with a
// head; a legacy root that the database does not hold is still refused.
func TestLegacyState(t *testing.T) {
	ctx := context.Background()
	dir, _ := revokedAuthority(t)
	a, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := openCP(t, a)
	a.Close()
	skey, err := os.ReadFile(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		t.Fatal(err)
	}
	legacy := func(root [32]byte) string {
		m, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: s.Name(), Size: h.Size, Root: root, Time: h.Time}, s)
		if err != nil {
			t.Fatal(err)
		}
		return string(m)
	}
	state := filepath.Join(dir, StateFile)

	wrong := h.Root
	wrong[0] ^= 1
	if err := ttpstate.Write(state, &ttpstate.State{Checkpoint: legacy(wrong)}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrBehind) {
		t.Fatalf("legacy state the database does not hold: %v, want ErrBehind", err)
	}

	if err := ttpstate.Write(state, &ttpstate.State{Checkpoint: legacy(h.Root)}); err != nil {
		t.Fatal(err)
	}
	var said []string
	a, err = Open(dir, Options{Logf: func(f string, args ...any) { said = append(said, f) }})
	if err != nil {
		t.Fatalf("legacy state the database holds: %v", err)
	}
	defer a.Close()
	if len(said) != 1 || !strings.Contains(said[0], "format before sorted-tree heads") {
		t.Fatalf("Open said %q, want a note on the legacy state", said)
	}
	if _, err := a.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := ttpstate.Read(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.OpenHeadAnyAge([]byte(st.Checkpoint), a.Verifier()); err != nil {
		t.Fatalf("state after the next publication: %v", err)
	}
}
