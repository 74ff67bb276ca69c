package revocation_test

import (
	"context"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rev "github.com/pkie/pkie/internal/pkies/revocation"
	. "github.com/pkie/pkie/internal/revocation"
	"github.com/pkie/pkie/internal/ttpstate"
)

// revokedAuthority is an authority directory that has signed a tree of
// three revoked keys, closed.
func revokedAuthority(t *testing.T) (dir string, kid []byte) {
	t.Helper()
	a, dir := newAuthority(t, nil)
	ca := newCA(t, "State CA")
	kid, err := rev.IssuerKeyID(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddSerials(context.Background(), kid, []*big.Int{big.NewInt(1), big.NewInt(2), big.NewInt(3)}, "t"); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if fi, err := os.Stat(filepath.Join(dir, StateFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", fi, err)
	}
	return dir, kid
}

func removeDB(t *testing.T, dir string) {
	t.Helper()
	for _, s := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(dir, DBFile+s)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// TestRefusesDatabaseBehindState is the rollback attack on an authority: an authority whose
// database was lost, truncated or rolled back must not start and sign a
// smaller tree under its key.
func TestRefusesDatabaseBehindState(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, dir string, kid []byte)
		want   string
	}{
		{"deleted", func(t *testing.T, dir string, _ []byte) { removeDB(t, dir) }, "holds 0 revoked keys, but the authority last signed a tree of 3"},
		{"truncated", func(t *testing.T, dir string, _ []byte) {
			if err := os.Truncate(filepath.Join(dir, DBFile), 0); err != nil {
				t.Fatal(err)
			}
		}, "holds 0 revoked keys, but the authority last signed a tree of 3"},
		{"other keys of the same count", func(t *testing.T, dir string, kid []byte) {
			// A database rebuilt from other input: as many keys, another set.
			removeDB(t, dir)
			a, err := Open(dir, Options{AcceptFork: true})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if _, err := a.AddSerials(ctx, kid, []*big.Int{big.NewInt(1), big.NewInt(2), big.NewInt(4)}, "t"); err != nil {
				t.Fatal(err)
			}
			// Put the old state back, as if only the database had changed.
			os.Rename(filepath.Join(dir, StateFile+".old"), filepath.Join(dir, StateFile))
		}, "the database does not hold what was signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, kid := revokedAuthority(t)
			old, _ := os.ReadFile(filepath.Join(dir, StateFile))
			os.WriteFile(filepath.Join(dir, StateFile+".old"), old, 0o600)
			tc.break_(t, dir, kid)
			_, err := Open(dir, Options{})
			if !errors.Is(err, ErrBehind) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open of a database behind the state: %v, want ErrBehind naming %q", err, tc.want)
			}
			// The operator's explicit way through: the fork is accepted
			// and the next publication records the new tree.
			var logged []string
			a, err := Open(dir, Options{AcceptFork: true, Logf: func(f string, x ...any) { logged = append(logged, f) }})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if len(logged) == 0 || !strings.Contains(logged[0], "ACCEPTING A FORK") {
				t.Errorf("accepted fork not logged: %q", logged)
			}
			if _, err := a.Publish(ctx); err != nil {
				t.Fatal(err)
			}
			a.Close()
			b, err := Open(dir, Options{})
			if err != nil {
				t.Fatalf("after an accepted fork and a publication: %v", err)
			}
			b.Close()
		})
	}
}

// TestStateUpgradeAndLoss: an authority from before the state file adopts
// its database's latest checkpoint; a key with neither a state file nor a
// signed checkpoint is a lost database, refused.
func TestStateUpgradeAndLoss(t *testing.T) {
	dir, _ := revokedAuthority(t)
	state := filepath.Join(dir, StateFile)
	want, _ := os.ReadFile(state)
	os.Remove(state)
	var logged []string
	a, err := Open(dir, Options{Logf: func(f string, x ...any) { logged = append(logged, f) }})
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	a.Close()
	got, err := os.ReadFile(state)
	if err != nil || string(got) != string(want) || len(logged) != 1 {
		t.Fatalf("upgrade wrote %q (%v), logged %q; want %q", got, err, logged, want)
	}
	// Both gone: refused, not an empty tree.
	os.Remove(state)
	removeDB(t, dir)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrBehind) {
		t.Fatalf("key without state or database: %v", err)
	}
	// A state file that is not the authority's own is refused, not ignored.
	os.WriteFile(state, []byte(`{"version":1,"checkpoint":"forged\n"}`), 0o600)
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), StateFile) {
		t.Fatalf("corrupt state: %v", err)
	}
	if _, err := ttpstate.Read(state); err != nil {
		t.Fatal(err)
	}
}
