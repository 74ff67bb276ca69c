package oldctlog_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/pkie/pkie/checkpoint"
	. "github.com/pkie/pkie/internal/oldctlog"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/sortedtree"
)

// newTestLog creates a log in a temporary directory.
func newTestLog(t testing.TB) *Log {
	t.Helper()
	return newTestLogOpts(t, Options{})
}

// newTestLogOpts creates a log in a temporary directory and opens it with o.
func newTestLogOpts(t testing.TB, o Options) *Log {
	t.Helper()
	dir := t.TempDir()
	if _, err := Init(dir, "pkie.test/log"); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// filledLog returns a test log holding n freshly issued chains, and the
// chains.
func filledLog(t testing.TB, n int) (*Log, [][][]byte) {
	t.Helper()
	l := newTestLog(t)
	_, chains := issue(t, n)
	if _, err := l.AddChains(context.Background(), chains); err != nil {
		t.Fatal(err)
	}
	return l, chains
}

// issue returns n leaf chains from a fresh testbed hierarchy.
func issue(t testing.TB, n int) (*testbed.CA, [][][]byte) {
	t.Helper()
	root, err := testbed.NewRootCA("Log Test Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("Log Test CA", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	chains := make([][][]byte, n)
	for i := range chains {
		leaf, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
		if err != nil {
			t.Fatal(err)
		}
		chains[i] = leaf.Chain
	}
	return inter, chains
}

func TestAddChainSCT(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	_, chains := issue(t, 3)
	var first *AddResult
	for i, c := range chains {
		res, err := l.AddChain(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Index != uint64(i) || res.Duplicate {
			t.Fatalf("chain %d: index %d duplicate %v", i, res.Index, res.Duplicate)
		}
		if err := VerifySCT(l.Verifier(), c[0], res.SCT); err != nil {
			t.Fatalf("chain %d: %v", i, err)
		}
		if i == 0 {
			first = res
		}
	}
	// An SCT does not transfer to another certificate or time.
	if err := VerifySCT(l.Verifier(), chains[1][0], first.SCT); err == nil {
		t.Error("SCT of chain 0 verified for chain 1")
	}
	moved := *first.SCT
	moved.Timestamp++
	if err := VerifySCT(l.Verifier(), chains[0][0], &moved); err == nil {
		t.Error("SCT with a changed timestamp verified")
	}
	// Resubmission returns the original entry.
	again, err := l.AddChain(ctx, chains[0])
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Index != 0 || again.SCT.Timestamp != first.SCT.Timestamp || !bytes.Equal(again.SCT.Signature, first.SCT.Signature) {
		t.Errorf("resubmission: %+v, want the original %+v", again, first)
	}
	if n, _ := l.Size(ctx); n != 3 {
		t.Errorf("size %d after a duplicate, want 3", n)
	}
	// PEM input, and a bad chain.
	var pemChain []byte
	for _, der := range chains[2] {
		pemChain = append(pemChain, "-----BEGIN CERTIFICATE-----\n"...)
		pemChain = append(pemChain, []byte(b64lines(der))...)
		pemChain = append(pemChain, "-----END CERTIFICATE-----\n"...)
	}
	parsed, err := ParseAddChainRequest(pemChain)
	if err != nil || len(parsed) != len(chains[2]) || !bytes.Equal(parsed[0], chains[2][0]) {
		t.Fatalf("PEM chain parsed to %d certs, %v", len(parsed), err)
	}
	for _, bad := range [][][]byte{{}, {[]byte("not a certificate")}, {chains[0][0], []byte{0x30, 0x00}}} {
		if _, err := l.AddChain(ctx, bad); err == nil {
			t.Errorf("chain %q accepted", bad)
		}
	}
}

func b64lines(der []byte) string {
	s := base64.StdEncoding.EncodeToString(der)
	var b bytes.Buffer
	for len(s) > 64 {
		b.WriteString(s[:64] + "\n")
		s = s[64:]
	}
	b.WriteString(s + "\n")
	return b.String()
}

func TestRootsRestriction(t *testing.T) {
	ca, chains := issue(t, 1)
	_, other := issue(t, 1)
	dir := t.TempDir()
	if _, err := Init(dir, "pkie.test/log"); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{Roots: ca.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.AddChain(context.Background(), chains[0]); err != nil {
		t.Errorf("chain to an accepted root refused: %v", err)
	}
	var rejected *RejectedError
	if _, err := l.AddChain(context.Background(), other[0]); !errors.As(err, &rejected) {
		t.Errorf("chain to another root: %v, want a RejectedError", err)
	}

	// Over HTTP a refused chain is the client's error (400) and a failing
	// log is the server's (500).
	h := l.Handler(HandlerOptions{})
	post := func(chain [][]byte) *httptest.ResponseRecorder {
		var b64 []string
		for _, der := range chain {
			b64 = append(b64, base64.StdEncoding.EncodeToString(der))
		}
		body, _ := json.Marshal(map[string][]string{"chain": b64})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/log/add-chain", bytes.NewReader(body)))
		return rec
	}
	for _, tt := range []struct {
		name  string
		chain [][]byte
		close bool
		code  int
		want  string
	}{
		{"accepted root", chains[0], false, http.StatusOK, `"index"`},
		{"other root", other[0], false, http.StatusBadRequest, "accepted roots"},
		{"log closed", chains[0], true, http.StatusInternalServerError, "could not record"},
	} {
		if tt.close {
			l.Close()
		}
		if rec := post(tt.chain); rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("%s: %d %s, want %d with %q", tt.name, rec.Code, rec.Body, tt.code, tt.want)
		}
	}
}

func TestInclusionAndConsistencyProofs(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	_, chains := issue(t, 21)
	var leafHashes [][32]byte
	var roots [][32]byte
	for _, c := range chains {
		res, err := l.AddChain(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		in, _ := (&Leaf{Timestamp: res.SCT.Timestamp, Type: X509Entry, Data: c[0]}).Marshal()
		leafHashes = append(leafHashes, LeafHash(in))
		r, err := l.RootAt(ctx, uint64(len(leafHashes)))
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, r)
	}
	// The latest checkpoint signs the latest root.
	msg, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.Open(msg, l.Verifier(), l.Origin(), time.Hour, time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != 21 || cp.Root != roots[20] {
		t.Fatalf("checkpoint size %d root %x, want 21 %x", cp.Size, cp.Root, roots[20])
	}
	for size := uint64(1); size <= 21; size++ {
		for idx := uint64(0); idx < size; idx++ {
			p, err := l.InclusionProof(ctx, idx, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, idx, size, leafHashes[idx][:], p, roots[size-1][:]); err != nil {
				t.Fatalf("inclusion of %d in %d: %v", idx, size, err)
			}
		}
		for first := uint64(1); first <= size; first++ {
			p, err := l.ConsistencyProof(ctx, first, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, first, size, p, roots[first-1][:], roots[size-1][:]); err != nil {
				t.Fatalf("consistency %d→%d: %v", first, size, err)
			}
		}
	}
	if _, err := l.InclusionProof(ctx, 0, 22); err == nil {
		t.Error("proof for a size beyond the log")
	}
}

func TestBuildSortedExtendedTree(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	_, chains := issue(t, 9)
	if _, err := l.AddChains(ctx, chains[:5]); err != nil {
		t.Fatal(err)
	}
	b1, err := l.BuildSorted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b1.Size != 5 || b1.EntryIndex != 5 {
		t.Fatalf("build: size %d entry %d, want 5 and 5", b1.Size, b1.EntryIndex)
	}
	if _, err := l.AddChains(ctx, chains[5:]); err != nil {
		t.Fatal(err)
	}
	b2, err := l.BuildSorted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b2.Size != 9 || b2.EntryIndex != 10 {
		t.Fatalf("build: size %d entry %d, want 9 and 10", b2.Size, b2.EntryIndex)
	}
	// The signed sorted root is the log's leaf at EntryIndex.
	es, err := l.Entries(ctx, b2.EntryIndex, b2.EntryIndex+1)
	if err != nil {
		t.Fatal(err)
	}
	lf, err := ParseLeaf(es[0].LeafInput)
	if err != nil {
		t.Fatal(err)
	}
	if lf.Type != SortedRootEntry || !bytes.Equal(lf.Data, b2.Checkpoint) {
		t.Fatalf("entry %d: type %#x, data %q", b2.EntryIndex, lf.Type, lf.Data)
	}
	scp, err := checkpoint.OpenHead(lf.Data, l.Verifier(), time.Hour, time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Bound to the log checkpoint the tree was built from: the 10 entries
	// before its own.
	if scp.Log.Size != 10 || scp.Log.Origin != l.Origin() {
		t.Fatalf("head bound to %s at %d, want %s at 10", scp.Log.Origin, scp.Log.Size, l.Origin())
	}
	if root, err := l.RootAt(ctx, 10); err != nil || root != scp.Log.Root {
		t.Fatalf("head bound to root %x, the log's first 10 entries hash to %x (%v)", scp.Log.Root, root, err)
	}
	// The sorted tree holds SHA-256 of every logged certificate.
	keys := make([][32]byte, len(chains))
	for i, c := range chains {
		keys[i] = sha256.Sum256(c[0])
	}
	want := sortedtree.Build(slices.Clone(keys))
	if scp.Root != want.Root() || scp.Size != 9 {
		t.Fatalf("sorted checkpoint root %x size %d, want %x 9", scp.Root, scp.Size, want.Root())
	}
	tr, err := sortedtree.Open(b2.TreePath)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.Root() != want.Root() {
		t.Error("published tree file has another root")
	}
	rep, err := l.Audit(ctx, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("audit of an honest log failed: %+v", rep.Checks)
	}
	// The feed gives the keys in log order.
	got, err := l.Feed().Keys(ctx, 3, 100)
	if err != nil || len(got) != 6 || got[0] != keys[3] {
		t.Fatalf("feed keys from 3: %d keys, %v", len(got), err)
	}
}

// TestBuildSortedUnchanged: a build that finds the tree it last appended
// signs a fresh head (for verifiers' maximum age) but appends nothing, so an
// idle log does not grow by an entry per build; the audit still finds the
// earlier entry of the same tree. A changed tree is appended again.
func TestBuildSortedUnchanged(t *testing.T) {
	ctx := context.Background()
	clock := time.Now()
	l := newTestLogOpts(t, Options{Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	_, chains := issue(t, 4)
	if _, err := l.AddChains(ctx, chains[:3]); err != nil {
		t.Fatal(err)
	}
	b1, err := l.BuildSorted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n1, _ := l.Size(ctx)
	for i := range 3 {
		b, err := l.BuildSorted(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := l.Size(ctx)
		if b.Appended || n != n1 {
			t.Fatalf("build %d of an unchanged tree: appended %v, log grew from %d to %d entries", i+2, b.Appended, n1, n)
		}
		if b.EntryIndex != b1.EntryIndex || bytes.Equal(b.Checkpoint, b1.Checkpoint) {
			t.Fatalf("build %d: entry %d (want %d), head re-signed: %v", i+2, b.EntryIndex, b1.EntryIndex, !bytes.Equal(b.Checkpoint, b1.Checkpoint))
		}
		latest, err := l.SortedCheckpoint(ctx)
		if err != nil || !bytes.Equal(latest, b.Checkpoint) {
			t.Fatalf("the served head is not the fresh one (%v)", err)
		}
		h, err := checkpoint.OpenHead(latest, l.Verifier(), time.Hour, time.Minute, clock)
		if err != nil || h.Log.Size != n1 {
			t.Fatalf("fresh head: %v, bound to %d entries, want %d", err, h.Log.Size, n1)
		}
	}
	rep, err := l.Audit(ctx, AuditOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("audit after unchanged builds: %v %+v", err, rep)
	}
	if _, err := l.AddChain(ctx, chains[3]); err != nil {
		t.Fatal(err)
	}
	b, err := l.BuildSorted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Appended || b.EntryIndex != n1+1 {
		t.Fatalf("build of a changed tree: appended %v at %d, want at %d", b.Appended, b.EntryIndex, n1+1)
	}
}

type keySlice [][32]byte

func (k keySlice) Size() uint64          { return uint64(len(k)) }
func (k keySlice) Key(i uint64) [32]byte { return k[i] }

func TestAuditChecks(t *testing.T) {
	k := func(b byte) [32]byte { return [32]byte{b} }
	good := keySlice{k(1), k(2), k(3)}
	root, err := CheckSortedOrder(good)
	if err != nil || root != sortedtree.Build(good).Root() {
		t.Fatalf("sorted keys: root %x err %v", root, err)
	}
	for name, bad := range map[string]keySlice{
		"unsorted":   {k(1), k(3), k(2)},
		"duplicated": {k(1), k(2), k(2), k(3)},
	} {
		if _, err := CheckSortedOrder(bad); err == nil {
			t.Errorf("%s tree passed the order check", name)
		}
	}
	for name, tc := range map[string]struct {
		tree keySlice
		log  [][32]byte
	}{
		"extra key":   {keySlice{k(1), k(2), k(3)}, [][32]byte{k(1), k(2)}},
		"missing key": {keySlice{k(1), k(2)}, [][32]byte{k(1), k(2), k(3)}},
		"swapped key": {keySlice{k(1), k(2), k(4)}, [][32]byte{k(3), k(2), k(1)}},
	} {
		if err := CheckSameSet(tc.tree, tc.log); err == nil {
			t.Errorf("%s: set mismatch not caught", name)
		}
	}
	if err := CheckSameSet(good, [][32]byte{k(3), k(1), k(2)}); err != nil {
		t.Errorf("same set in another order: %v", err)
	}
}

// TestAuditTamperedTree rewrites the published file: two keys swapped, one
// key replaced by a certificate the log never saw. The audit must fail.
func TestAuditTamperedTree(t *testing.T) {
	ctx := context.Background()
	l, _ := filledLog(t, 6)
	b, err := l.BuildSorted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(b.TreePath)
	if err != nil {
		t.Fatal(err)
	}
	const keysAt = 64 // sortedtree file format v1: keys follow a 64-byte header
	for name, tamper := range map[string]func([]byte){
		"swapped keys": func(f []byte) {
			a, c := f[keysAt:keysAt+32], f[keysAt+32:keysAt+64]
			tmp := bytes.Clone(a)
			copy(a, c)
			copy(c, tmp)
		},
		"duplicated key": func(f []byte) { copy(f[keysAt+32:keysAt+64], f[keysAt:keysAt+32]) },
		"foreign key":    func(f []byte) { f[keysAt+5*32+31] ^= 1 },
	} {
		f := bytes.Clone(orig)
		tamper(f)
		path := filepath.Join(t.TempDir(), "tampered.tree")
		if err := os.WriteFile(path, f, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := l.Audit(ctx, AuditOptions{TreePath: path})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() {
			t.Errorf("%s: audit passed: %+v", name, rep.Checks)
		}
	}
}

// TestOpenRefusesExposedKey: a log key its group or others can read lets
// them sign checkpoints in the log's name, so Open refuses it and says how
// to fix it.
func TestOpenRefusesExposedKey(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o700, true},
		{0o640, false}, {0o604, false}, {0o644, false}, {0o660, false}, {0o602, false}, {0o666, false},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Init(dir, "pkie.test/log"); err != nil {
				t.Fatal(err)
			}
			key := filepath.Join(dir, KeyFile)
			if err := os.Chmod(key, tc.mode); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, Options{})
			if tc.ok {
				if err != nil {
					t.Fatalf("Open with key mode %v: %v", tc.mode, err)
				}
				l.Close()
				return
			}
			if err == nil {
				l.Close()
				t.Fatalf("Open accepted a key of mode %v", tc.mode)
			}
			for _, want := range []string{key, "chmod 600"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

// TestAuditRecomputesStoredEntries tampers with the log's SQLite file
// directly: proofs and the sorted tree come from the stored hashes and the
// certs table, so only recomputing every leaf hash from the stored entries
// catches a rewritten entry.
func TestAuditRecomputesStoredEntries(t *testing.T) {
	ctx := context.Background()
	_, other := issue(t, 1)
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, db *sql.DB)
	}{
		{"honest", nil},
		{"certificate replaced", func(t *testing.T, db *sql.DB) {
			var leaf []byte
			mustDB(t, db.QueryRow(`SELECT leaf FROM leaves WHERE idx = 2`).Scan(&leaf))
			lf, err := ParseLeaf(leaf)
			if err != nil {
				t.Fatal(err)
			}
			lf.Data = other[0][0]
			forged, err := lf.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			k := CertKey(other[0][0])
			mustExec(t, db, `UPDATE leaves SET leaf = ? WHERE idx = 2`, forged)
			mustExec(t, db, `UPDATE certs SET key = ? WHERE idx = 2`, k[:])
		}},
		{"certificate record rewritten", func(t *testing.T, db *sql.DB) {
			k := CertKey(other[0][0])
			mustExec(t, db, `UPDATE certs SET key = ? WHERE idx = 3`, k[:])
		}},
		{"byte flipped in a leaf", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `UPDATE leaves SET leaf = substr(leaf, 1, 40) || x'ff' || substr(leaf, 42) WHERE idx = 4`)
		}},
		{"leaf and its stored hash rewritten together", func(t *testing.T, db *sql.DB) {
			var leaf []byte
			mustDB(t, db.QueryRow(`SELECT leaf FROM leaves WHERE idx = 1`).Scan(&leaf))
			lf, err := ParseLeaf(leaf)
			if err != nil {
				t.Fatal(err)
			}
			lf.Timestamp++
			forged, err := lf.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			lh := LeafHash(forged)
			mustExec(t, db, `UPDATE leaves SET leaf = ? WHERE idx = 1`, forged)
			mustExec(t, db, `UPDATE nodes SET hash = ? WHERE level = 0 AND idx = 1`, lh[:])
		}},
		{"subtree hash rewritten", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `UPDATE nodes SET hash = zeroblob(32) WHERE level = 1 AND idx = 1`)
		}},
		{"entry deleted", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `DELETE FROM leaves WHERE idx = 3`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := filledLog(t, 6)
			if _, err := l.BuildSorted(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.tamper != nil {
				db, err := sql.Open("sqlite", filepath.Join(l.Dir(), DBFile))
				if err != nil {
					t.Fatal(err)
				}
				tc.tamper(t, db)
				db.Close()
			}
			rep, err := l.Audit(ctx, AuditOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() != (tc.tamper == nil) {
				t.Fatalf("audit OK = %v: %+v", rep.OK(), rep.Checks)
			}
			var check *AuditCheck
			for i := range rep.Checks {
				if rep.Checks[i].Name == "stored entries hash to the signed log root" {
					check = &rep.Checks[i]
				}
			}
			if check == nil || check.OK != (tc.tamper == nil) {
				t.Fatalf("the stored-entries check does not decide: %+v", rep.Checks)
			}
			t.Logf("%s: %s", check.Name, check.Detail)
		})
	}
}

func mustDB(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	res, err := db.Exec(q, args...)
	mustDB(t, err)
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("%s: %d rows affected, %v", q, n, err)
	}
}
