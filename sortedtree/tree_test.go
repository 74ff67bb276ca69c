package sortedtree

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// testKeys returns n distinct keys with gaps between them (every key is even
// in its last byte), shuffled and with some duplicates, as Build's input.
func testKeys(n int, seed uint64) [][32]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	keys := make([][32]byte, 0, n+n/3)
	for i := 0; i < n; i++ {
		var k [32]byte
		for j := 0; j < 32; j += 8 {
			binary.BigEndian.PutUint64(k[j:], r.Uint64())
		}
		k[31] &^= 1
		keys = append(keys, k)
	}
	for i := 0; i < n/3; i++ {
		keys = append(keys, keys[r.IntN(n)])
	}
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// referenceRoot computes the RFC 6962 root with transparency-dev/merkle.
func referenceRoot(t *testing.T, keys [][32]byte) [32]byte {
	t.Helper()
	if len(keys) == 0 {
		return [32]byte(rfc6962.DefaultHasher.EmptyRoot())
	}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	r := rf.NewEmptyRange(0)
	for _, k := range keys {
		if err := r.Append(rfc6962.DefaultHasher.HashLeaf(k[:]), nil); err != nil {
			t.Fatal(err)
		}
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		t.Fatal(err)
	}
	return [32]byte(root)
}

func prev(k [32]byte) [32]byte {
	for i := 31; i >= 0; i-- {
		k[i]--
		if k[i] != 0xff {
			break
		}
	}
	return k
}

func next(k [32]byte) [32]byte {
	for i := 31; i >= 0; i-- {
		k[i]++
		if k[i] != 0 {
			break
		}
	}
	return k
}

// roundTrip checks that p survives its binary encoding unchanged.
func roundTrip(t *testing.T, p *Proof) *Proof {
	t.Helper()
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	var q Proof
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary: %v", err)
	}
	if q.Kind != p.Kind || q.TreeSize != p.TreeSize || q.Index != p.Index ||
		!slices.Equal(q.Keys, p.Keys) || !slices.Equal(q.Hashes, p.Hashes) {
		t.Fatalf("round trip changed the proof: %+v -> %+v", p, q)
	}
	return &q
}

// TestProofsEverySizeEveryPosition proves every key and every gap (below
// the first, between each pair, above the last) of trees of every size from
// 0 to 70, checks the proofs verify after a round trip through the binary
// encoding, that roots match transparency-dev/merkle, and that presence
// proofs are RFC 6962 inclusion proofs that its verifier accepts.
func TestProofsEverySizeEveryPosition(t *testing.T) {
	for n := 0; n <= 70; n++ {
		tr := Build(testKeys(n, uint64(n)))
		if tr.Size() != uint64(n) {
			t.Fatalf("n=%d: Size() = %d after removing duplicates", n, tr.Size())
		}
		keys := tr.AppendKeys(nil)
		if !slices.IsSortedFunc(keys, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) }) {
			t.Fatalf("n=%d: keys not sorted", n)
		}
		root := tr.Root()
		if want := referenceRoot(t, keys); root != want {
			t.Fatalf("n=%d: root %x, transparency-dev/merkle says %x", n, root, want)
		}
		check := func(k [32]byte, wantPresent bool, wantKind Kind) {
			t.Helper()
			p, err := tr.Prove(k)
			if err != nil {
				t.Fatalf("n=%d: Prove: %v", n, err)
			}
			if p.Kind != wantKind {
				t.Fatalf("n=%d key %x: kind %v, want %v", n, k[:4], p.Kind, wantKind)
			}
			q := roundTrip(t, p)
			present, err := q.Verify(k, tr.Size(), root)
			if err != nil {
				t.Fatalf("n=%d key %x (%v at %d): Verify: %v", n, k[:4], p.Kind, p.Index, err)
			}
			if r, err := q.RootFor(k); err != nil || r != root {
				t.Fatalf("n=%d: RootFor = %x, %v", n, r[:4], err)
			}
			if present != wantPresent || tr.Contains(k) != wantPresent || p.Present() != wantPresent {
				t.Fatalf("n=%d: present = %v, want %v", n, present, wantPresent)
			}
			if p.Kind == Presence {
				path := make([][]byte, len(p.Hashes))
				for i := range p.Hashes {
					path[i] = p.Hashes[i][:]
				}
				lh := LeafHash(k)
				if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.Index, tr.Size(), lh[:], path, root[:]); err != nil {
					t.Fatalf("n=%d index %d: transparency-dev/merkle rejects the presence proof: %v", n, p.Index, err)
				}
			}
		}
		if n == 0 {
			check([32]byte{}, false, AbsentEmpty)
			check([32]byte{0xff}, false, AbsentEmpty)
			continue
		}
		for i, k := range keys {
			if tr.Key(uint64(i)) != k {
				t.Fatalf("Key(%d) wrong", i)
			}
			check(k, true, Presence)
			if i > 0 {
				check(next(keys[i-1]), false, AbsentBetween)
			}
		}
		check(prev(keys[0]), false, AbsentBelow)
		check(next(keys[n-1]), false, AbsentAbove)
	}
}

// TestAbsenceSharesNodes checks that an absence proof sends the nodes the two
// audit paths share once: its hashes are exactly the union of the two
// leaves' inclusion paths, less the one node in each path that covers the
// other leaf.
func TestAbsenceSharesNodes(t *testing.T) {
	tr := Build(testKeys(1000, 7))
	for i := uint64(1); i < tr.Size(); i++ {
		p, err := tr.Prove(next(tr.Key(i - 1)))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := tr.Prove(tr.Key(i - 1))
		b, _ := tr.Prove(tr.Key(i))
		union := map[[32]byte]bool{}
		for _, h := range append(slices.Clone(a.Hashes), b.Hashes...) {
			union[h] = true
		}
		if len(p.Hashes) != len(union)-2 {
			t.Fatalf("leaves %d,%d: %d hashes, want %d (paths of %d and %d)", i-1, i, len(p.Hashes), len(union)-2, len(a.Hashes), len(b.Hashes))
		}
		for _, h := range p.Hashes {
			if !union[h] {
				t.Fatalf("leaves %d,%d: hash %x is on neither path", i-1, i, h[:4])
			}
		}
	}
}

// TestEveryByteChangeRejected flips every byte of proofs of every kind to
// every other value: each change must be caught by decoding or verifying.
func TestEveryByteChangeRejected(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 5, 8, 13, 21} {
		tr := Build(testKeys(n, 100+uint64(n)))
		var probes [][32]byte
		if n == 0 {
			probes = append(probes, [32]byte{1})
		} else {
			probes = append(probes, tr.Key(0), tr.Key(uint64(n-1)), prev(tr.Key(0)), next(tr.Key(uint64(n-1))))
			if n > 1 {
				probes = append(probes, next(tr.Key(0)), tr.Key(uint64(n/2)))
			}
		}
		for _, k := range probes {
			p, _ := tr.Prove(k)
			enc, _ := p.MarshalBinary()
			for i := range enc {
				for d := 1; d < 256; d++ {
					b := slices.Clone(enc)
					b[i] ^= byte(d)
					var q Proof
					if err := q.UnmarshalBinary(b); err != nil {
						continue
					}
					if present, err := q.Verify(k, tr.Size(), tr.Root()); err == nil {
						t.Fatalf("n=%d %v: byte %d ^ %#x accepted (present=%v)", n, p.Kind, i, d, present)
					}
				}
			}
			// Truncated and extended encodings.
			for cut := 0; cut < len(enc); cut++ {
				var q Proof
				if q.UnmarshalBinary(enc[:cut]) == nil {
					if _, err := q.Verify(k, tr.Size(), tr.Root()); err == nil {
						t.Fatalf("n=%d: truncated to %d accepted", n, cut)
					}
				}
			}
			var q Proof
			if err := q.UnmarshalBinary(append(slices.Clone(enc), 0)); err == nil {
				t.Fatalf("n=%d: trailing byte accepted", n)
			}
		}
	}
}

// TestVerifyRejects covers wrong keys, roots and sizes, and hand-made
// proofs that lie about adjacency or order.
func TestVerifyRejects(t *testing.T) {
	tr := Build(testKeys(40, 3))
	root, size := tr.Root(), tr.Size()
	k5, k6 := tr.Key(5), tr.Key(6)
	pres, _ := tr.Prove(k5)
	gap := next(k5)
	abs, _ := tr.Prove(gap)
	badRoot := root
	badRoot[0] ^= 1

	// A "between" proof whose leaves are not adjacent: leaves 5 and 7
	// bracket k6 but the proof can only claim positions i, i+1.
	far := &Proof{Kind: AbsentBetween, TreeSize: size, Index: 5, Keys: [][32]byte{k5, tr.Key(7)}, Hashes: abs.Hashes}

	tests := []struct {
		name string
		p    *Proof
		key  [32]byte
		size uint64
		root [32]byte
		want error
	}{
		{"presence, wrong key", pres, k6, size, root, ErrRootMismatch},
		{"presence, wrong root", pres, k5, size, badRoot, ErrRootMismatch},
		{"presence, wrong size", pres, k5, size + 1, root, ErrSizeMismatch},
		{"absence, key not between", abs, next(k6), size, root, ErrWrongKey},
		{"absence, key equal to left", abs, k5, size, root, ErrWrongKey},
		{"absence, key equal to right", abs, k6, size, root, ErrWrongKey},
		{"absence, wrong root", abs, gap, size, badRoot, ErrRootMismatch},
		{"absence, wrong size", abs, gap, size - 1, root, ErrSizeMismatch},
		{"not adjacent", far, k6, size, root, ErrRootMismatch},
		{"presence relabelled as absence", &Proof{Kind: AbsentBelow, TreeSize: size, Keys: [][32]byte{k5}, Hashes: pres.Hashes}, [32]byte{}, size, root, ErrRootMismatch},
		{"empty proof for a non-empty tree", &Proof{Kind: AbsentEmpty, TreeSize: size}, gap, size, root, ErrMalformed},
		{"empty proof, real root", &Proof{Kind: AbsentEmpty}, gap, 0, root, ErrRootMismatch},
		{"missing hash", &Proof{Kind: Presence, TreeSize: size, Index: 5, Hashes: pres.Hashes[1:]}, k5, size, root, ErrMalformed},
		{"extra hash", &Proof{Kind: Presence, TreeSize: size, Index: 5, Hashes: append(slices.Clone(pres.Hashes), root)}, k5, size, root, ErrMalformed},
		{"index out of range", &Proof{Kind: Presence, TreeSize: size, Index: size, Hashes: pres.Hashes}, k5, size, root, ErrMalformed},
		{"unknown kind", &Proof{Kind: 9, TreeSize: size}, k5, size, root, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			present, err := tc.p.Verify(tc.key, tc.size, tc.root)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, %v; want %v", present, err, tc.want)
			}
		})
	}
	// A correct proof replayed against a later tree (one more key) fails.
	keys := append(tr.AppendKeys(nil), next(next(k5)))
	tr2 := Build(keys)
	if _, err := pres.Verify(k5, tr2.Size(), tr2.Root()); err == nil {
		t.Fatal("proof for the old tree verified against the new one")
	}
}

func TestUnmarshalErrors(t *testing.T) {
	tr := Build(testKeys(10, 1))
	p, _ := tr.Prove(tr.Key(3))
	good, _ := p.MarshalBinary()
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short header", good[:10]},
		{"bad version", append([]byte{2}, good[1:]...)},
		{"bad kind", append([]byte{1, 0}, good[2:]...)},
		{"partial hash", good[:len(good)-1]},
		{"trailing", append(slices.Clone(good), make([]byte, 32)...)},
		{"huge", append(slices.Clone(good[:headerLen]), make([]byte, 32*500)...)},
	}
	for _, tc := range tests {
		var q Proof
		if err := q.UnmarshalBinary(tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", tc.name, err)
		}
	}
}

func TestProofJSON(t *testing.T) {
	tr := Build(testKeys(9, 1))
	p, _ := tr.Prove(next(tr.Key(2)))
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["kind"] != "absent-between" || m["present"] != false || m["index"] != 2.0 || m["tree_size"] != 9.0 {
		t.Fatalf("JSON = %s", b)
	}
	if len(m["keys"].([]any)) != 2 || len(m["hashes"].([]any)) != len(p.Hashes) {
		t.Fatalf("JSON = %s", b)
	}
}

// TestFileRoundTrip writes trees of several sizes at several stored levels,
// opens them memory-mapped, and checks every key, the root, proofs and Check.
func TestFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 2, 3, 4, 7, 100, 129, 1000, 5000} {
		tr := Build(testKeys(n, 11+uint64(n)))
		for _, level := range []int{0, 1, 2, 3, DefaultFileLevel, 20} {
			path := filepath.Join(dir, "tree")
			if err := tr.WriteFileLevel(path, level); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if min := int64(fileHeader + 32*n); fi.Size() < min {
				t.Fatalf("file is %d bytes, less than the keys", fi.Size())
			}
			o, err := Open(path)
			if err != nil {
				t.Fatalf("n=%d level=%d: Open: %v", n, level, err)
			}
			if o.Size() != tr.Size() || o.Root() != tr.Root() {
				t.Fatalf("n=%d level=%d: opened tree differs", n, level)
			}
			if err := o.Check(); err != nil {
				t.Fatalf("n=%d level=%d: Check: %v", n, level, err)
			}
			// Prove while the cache may still be filling, then once it
			// is full: both must give the built tree's proofs.
			for _, wait := range []bool{false, true} {
				if wait {
					<-o.Ready()
				}
				for i := uint64(0); i < tr.Size(); i += 1 + tr.Size()/50 {
					k := tr.Key(i)
					if o.Key(i) != k {
						t.Fatalf("key %d differs", i)
					}
					for _, q := range [][32]byte{k, next(k)} {
						a, _ := tr.Prove(q)
						b, _ := o.Prove(q)
						ea, _ := a.MarshalBinary()
						eb, _ := b.MarshalBinary()
						if !bytes.Equal(ea, eb) {
							t.Fatalf("n=%d level=%d ready=%v: proofs differ for key %d", n, level, wait, i)
						}
					}
				}
			}
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestOpenRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	tr := Build(testKeys(300, 5))
	path := filepath.Join(dir, "good")
	if err := tr.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(b []byte) []byte) string {
		b := f(slices.Clone(good))
		p := filepath.Join(dir, "bad")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		f    func([]byte) []byte
	}{
		{"empty", func(b []byte) []byte { return nil }},
		{"magic", func(b []byte) []byte { b[0] = 'x'; return b }},
		{"version", func(b []byte) []byte { b[11] = 9; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"extended", func(b []byte) []byte { return append(b, 0) }},
		{"count", func(b []byte) []byte { b[23]++; return b }},
		{"root", func(b []byte) []byte { b[30] ^= 1; return b }},
		{"top level hash", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"reserved", func(b []byte) []byte { b[60] = 1; return b }},
	}
	for _, tc := range tests {
		if o, err := Open(mutate(tc.f)); err == nil {
			o.Close()
			t.Errorf("%s: Open accepted a bad file", tc.name)
		}
	}
	// A changed key or an unsorted file opens (Open does not re-hash) but
	// Check catches it.
	for name, f := range map[string]func([]byte) []byte{
		"key changed": func(b []byte) []byte { b[fileHeader+32*10+5] ^= 1; return b },
		"keys swapped": func(b []byte) []byte {
			a, c := b[fileHeader+32*10:fileHeader+32*11], b[fileHeader+32*11:fileHeader+32*12]
			tmp := slices.Clone(a)
			copy(a, c)
			copy(c, tmp)
			return b
		},
		"duplicate": func(b []byte) []byte {
			copy(b[fileHeader+32*11:fileHeader+32*12], b[fileHeader+32*10:fileHeader+32*11])
			return b
		},
	} {
		o, err := Open(mutate(f))
		if err != nil {
			// Levels below the file's stored level are rebuilt from the
			// keys, so a changed key can also show up as a root mismatch.
			continue
		}
		if err := o.Check(); err == nil {
			t.Errorf("%s: Check accepted a corrupt tree", name)
		}
		o.Close()
	}
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
}

// TestCloseWhileFilling closes a tree whose cache is still being filled.
func TestCloseWhileFilling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tree")
	if err := Build(testKeys(200000, 4)).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	o, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	<-o.Ready()
}

func TestCheckCatchesUnsorted(t *testing.T) {
	tr := Build(testKeys(50, 9))
	tr.keys[3], tr.keys[4] = tr.keys[4], tr.keys[3]
	var ke *KeyOrderError
	if err := tr.Check(); !errors.As(err, &ke) || ke.Index != 4 || ke.Duplicate {
		t.Fatalf("Check = %v", err)
	}
	tr.keys[4] = tr.keys[3]
	if err := tr.Check(); !errors.As(err, &ke) || !ke.Duplicate {
		t.Fatalf("Check = %v", err)
	}
}

func TestSortKeysLarge(t *testing.T) {
	// Above the parallel threshold, including skewed input (all in one
	// bucket for many bytes) and heavy duplication; and small inputs.
	for _, tc := range []struct {
		n    int
		skew int
		dups bool
	}{{1 << 17, 0, false}, {1 << 17, 2, false}, {1 << 17, 20, false}, {1 << 17, 0, true}, {1000, 0, false}, {1000, 31, true}, {40, 0, false}} {
		keys := testKeys(tc.n, 21)
		for i := range keys {
			for j := 0; j < tc.skew; j++ {
				keys[i][j] = 7
			}
			if tc.dups {
				keys[i] = keys[i%5]
			}
		}
		want := slices.Clone(keys)
		slices.SortFunc(want, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
		sortKeys(keys)
		if !slices.Equal(keys, want) {
			t.Fatalf("%+v: radix sort disagrees with slices.SortFunc", tc)
		}
	}
}

func TestLeafAndNodeHash(t *testing.T) {
	k := sha256.Sum256([]byte("x"))
	if got, want := LeafHash(k), rfc6962.DefaultHasher.HashLeaf(k[:]); !bytes.Equal(got[:], want) {
		t.Fatal("LeafHash differs from RFC 6962")
	}
	if got, want := NodeHash(k, k), rfc6962.DefaultHasher.HashChildren(k[:], k[:]); !bytes.Equal(got[:], want) {
		t.Fatal("NodeHash differs from RFC 6962")
	}
	if got := EmptyRoot(); !bytes.Equal(got[:], rfc6962.DefaultHasher.EmptyRoot()) {
		t.Fatal("EmptyRoot differs from RFC 6962")
	}
}

// TestSearchIndex checks the prefix index against a plain search, with
// runs of keys sharing their first 8 bytes across index blocks, and for an
// opened tree before and after its index is ready.
func TestSearchIndex(t *testing.T) {
	keys := testKeys(3000, 8)[:3000]
	for i := range keys {
		if i%3 != 0 {
			// Three long runs of equal 8-byte prefixes.
			copy(keys[i][:8], []byte{byte(i % 3), 0, 0, 0, 0, 0, 0, 9})
		}
	}
	tr := Build(keys)
	path := filepath.Join(t.TempDir(), "tree")
	if err := tr.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	o, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	all := tr.AppendKeys(nil)
	probe := func(tt *Tree, k [32]byte) {
		t.Helper()
		i, found := tt.search(&k)
		j, want := slices.BinarySearchFunc(all, k, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
		if int(i) != j || found != want {
			t.Fatalf("search(%x) = %d,%v; want %d,%v", k[:10], i, found, j, want)
		}
	}
	for _, tt := range []*Tree{tr, o, o} {
		for _, k := range all {
			probe(tt, k)
			probe(tt, next(k))
			probe(tt, prev(k))
		}
		probe(tt, [32]byte{})
		probe(tt, [32]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		<-o.Ready()
	}
}

// TestMerge checks that merging new keys (with duplicates, and keys already
// in the tree) gives the tree Build gives for the union, for built and
// opened trees.
func TestMerge(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 7, 300, 3000} {
		for _, m := range []int{0, 1, 5, 1000} {
			base := testKeys(n, uint64(n))
			add := testKeys(m, uint64(1000+m))
			if n > 0 && m > 0 {
				add = append(add, base[0], base[n/2]) // already present
			}
			want := Build(append(slices.Clone(base), add...))
			tr := Build(slices.Clone(base))
			path := filepath.Join(dir, "t")
			if err := tr.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			o, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, from := range []*Tree{tr, o} {
				got := from.Merge(slices.Clone(add))
				if got.Size() != want.Size() || got.Root() != want.Root() {
					t.Fatalf("n=%d m=%d: merged %d keys root %x, built %d keys root %x", n, m, got.Size(), got.Root(), want.Size(), want.Root())
				}
				if err := got.Check(); err != nil {
					t.Fatal(err)
				}
			}
			if tr.Root() == want.Root() && m > 0 {
				t.Fatalf("n=%d m=%d: Merge changed nothing?", n, m)
			}
			o.Close()
		}
	}
}

// TestListRoot checks List against transparency-dev's RFC 6962 compact
// range at every size up to 70, appending one key and several at a time.
func TestListRoot(t *testing.T) {
	f := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	r := f.NewEmptyRange(0)
	var l, batch List
	var keys [][32]byte
	for i := 0; i <= 70; i++ {
		want := [32]byte(rfc6962.DefaultHasher.EmptyRoot())
		if i > 0 {
			h, err := r.GetRootHash(nil)
			if err != nil {
				t.Fatal(err)
			}
			want = [32]byte(h)
		}
		if l.Size() != uint64(i) || l.Root() != want || ListRoot(keys) != want {
			t.Fatalf("size %d: root %x, want %x", i, l.Root(), want)
		}
		k := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		keys = append(keys, k)
		lh := LeafHash(k)
		if err := r.Append(lh[:], nil); err != nil {
			t.Fatal(err)
		}
		l.Append(k)
	}
	batch.Append(keys[:33]...)
	batch.Append(keys[33:]...)
	if batch.Root() != l.Root() {
		t.Fatal("appending in batches gives another root")
	}
}
