package sortedtree

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"runtime"
)

// Kind says what a proof proves.
type Kind uint8

// The kinds of proof. Every absence proof shows leaves next to where the key
// would be, so that the sort order rules the key out.
const (
	// Presence: the key is leaf Index.
	Presence Kind = 1
	// AbsentBetween: leaves Index and Index+1 are adjacent, and
	// Keys[0] < key < Keys[1].
	AbsentBetween Kind = 2
	// AbsentBelow: key < Keys[0], the key of leaf 0.
	AbsentBelow Kind = 3
	// AbsentAbove: key > Keys[0], the key of the last leaf.
	AbsentAbove Kind = 4
	// AbsentEmpty: the tree is empty.
	AbsentEmpty Kind = 5
)

func (k Kind) String() string {
	switch k {
	case Presence:
		return "presence"
	case AbsentBetween:
		return "absent-between"
	case AbsentBelow:
		return "absent-below-first"
	case AbsentAbove:
		return "absent-above-last"
	case AbsentEmpty:
		return "absent-empty-tree"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// keyCount is how many bracketing keys a proof of kind k carries. A presence
// proof carries none: the verifier already has the key.
func (k Kind) keyCount() int {
	switch k {
	case AbsentBetween:
		return 2
	case AbsentBelow, AbsentAbove:
		return 1
	}
	return 0
}

// Proof proves that a key is, or is not, in a sorted tree of TreeSize leaves.
// It covers a range of one or two adjacent leaves starting at Index; Hashes
// are the RFC 6962 subtree hashes needed to recompute the root from those
// leaves, each sent once even where the two leaves' audit paths share it, in
// the order of a left-to-right walk of the tree (see docs/formats/proofs.md).
type Proof struct {
	Kind     Kind
	TreeSize uint64
	Index    uint64     // first leaf covered; 0 for AbsentEmpty
	Keys     [][32]byte // the bracketing keys of an absence proof
	Hashes   [][32]byte
}

// Present reports whether p is a presence proof. Only Verify says whether it
// is a valid one.
func (p *Proof) Present() bool { return p.Kind == Presence }

// leafRange returns the leaves [begin, end) the proof covers.
func (p *Proof) leafRange() (begin, end uint64) {
	switch p.Kind {
	case AbsentBetween:
		return p.Index, p.Index + 2
	case AbsentEmpty:
		return 0, 0
	}
	return p.Index, p.Index + 1
}

// checkShape checks that the kind, size, index and number of keys and hashes
// fit together, independently of any key or root.
func (p *Proof) checkShape() error {
	n := p.TreeSize
	switch p.Kind {
	case Presence:
		if p.Index >= n {
			return fmt.Errorf("%w: presence of leaf %d in a tree of %d", ErrMalformed, p.Index, n)
		}
	case AbsentBetween:
		if n < 2 || p.Index >= n-1 {
			return fmt.Errorf("%w: leaves %d and %d are not both in a tree of %d", ErrMalformed, p.Index, p.Index+1, n)
		}
	case AbsentBelow:
		if n == 0 || p.Index != 0 {
			return fmt.Errorf("%w: below-first proof must show leaf 0 of a non-empty tree (got leaf %d of %d)", ErrMalformed, p.Index, n)
		}
	case AbsentAbove:
		if n == 0 || p.Index != n-1 {
			return fmt.Errorf("%w: above-last proof must show the last leaf (got leaf %d of %d)", ErrMalformed, p.Index, n)
		}
	case AbsentEmpty:
		if n != 0 || p.Index != 0 {
			return fmt.Errorf("%w: empty-tree proof for a tree of %d leaves", ErrMalformed, n)
		}
	default:
		return fmt.Errorf("%w: unknown kind %d", ErrMalformed, uint8(p.Kind))
	}
	if len(p.Keys) != p.Kind.keyCount() {
		return fmt.Errorf("%w: %v proof has %d keys, want %d", ErrMalformed, p.Kind, len(p.Keys), p.Kind.keyCount())
	}
	begin, end := p.leafRange()
	if want := rangeHashCount(n, begin, end); uint64(len(p.Hashes)) != want {
		return fmt.Errorf("%w: %d hashes, want %d for leaves [%d, %d) of %d", ErrMalformed, len(p.Hashes), want, begin, end, n)
	}
	return nil
}

// Prove returns a presence proof for k if k is in the tree and an absence
// proof otherwise.
func (t *Tree) Prove(k [32]byte) (*Proof, error) {
	n := t.Size()
	p := &Proof{TreeSize: n}
	if n == 0 {
		p.Kind = AbsentEmpty
		return p, nil
	}
	i, found := t.search(&k)
	switch {
	case found:
		p.Kind, p.Index = Presence, i
	case i == 0:
		p.Kind, p.Index = AbsentBelow, 0
		p.Keys = [][32]byte{t.keys[0]}
	case i == n:
		p.Kind, p.Index = AbsentAbove, n-1
		p.Keys = [][32]byte{t.keys[n-1]}
	default:
		p.Kind, p.Index = AbsentBetween, i-1
		p.Keys = [][32]byte{t.keys[i-1], t.keys[i]}
	}
	begin, end := p.leafRange()
	t.touchPath(begin)
	if end-begin == 2 {
		t.touchPath(begin + 1)
	}
	p.Hashes = make([][32]byte, 0, rangeHashCount(n, begin, end))
	p.Hashes = t.collect(0, n, height(n), begin, end, p.Hashes)
	return p, nil
}

// touchPath reads one byte of the sibling of leaf i's ancestor at every
// cached or stored level before collect walks them. The reads do not
// depend on each other, so the processor overlaps their cache and TLB
// misses, where collect, which hashes between them, takes them one after
// the other: at 100 million keys, a proof's two dozen reads at random
// places of 1.6 GB of levels are most of its cost.
func (t *Tree) touchPath(i uint64) {
	var sum byte
	if c := t.cache; c != nil && c.filled.Load() {
		for k, lv := range c.levels {
			if j := (i >> uint(CacheLevel+k)) ^ 1; j < uint64(len(lv)) {
				sum += lv[j][0]
			}
		}
	}
	for k, lv := range t.levels {
		if j := (i >> uint(t.low+k)) ^ 1; j < uint64(len(lv)) {
			sum += lv[j][0]
		}
	}
	runtime.KeepAlive(sum) // the reads are the point: keep them
}

// collect appends the hashes a proof for leaves [begin, end) needs below the
// node at level l covering [lo, hi), which must overlap [begin, end). At each
// node it first descends into the children that overlap the range, left then
// right, and only then appends the hash of a child that does not. For one
// leaf this is exactly the RFC 6962 audit path, bottom-up; for two adjacent
// leaves it is the left leaf's path up to where the two paths meet, then the
// right leaf's, then the path they share, each node once. The RFC 6962 split
// of a range of s > 1 leaves is at the largest power of two below s, which
// for a node at level l is 1<<(l-1).
func (t *Tree) collect(lo, hi uint64, l int, begin, end uint64, out [][32]byte) [][32]byte {
	if hi-lo == 1 {
		return out
	}
	mid := lo + 1<<uint(l-1)
	rl := subtreeLevel(hi - mid)
	leftIn, rightIn := lo < end && begin < mid, mid < end && begin < hi
	if leftIn {
		out = t.collect(lo, mid, l-1, begin, end, out)
	}
	if rightIn {
		out = t.collect(mid, hi, rl, begin, end, out)
	}
	if !leftIn {
		out = append(out, t.node(l-1, lo>>uint(l-1)))
	}
	if !rightIn {
		out = append(out, t.node(rl, mid>>uint(rl)))
	}
	return out
}

// subtreeLevel returns the level of the node covering a range of size
// leaves: the smallest l with 1<<l >= size.
func subtreeLevel(size uint64) int { return bits.Len64(size - 1) }

// rangeHashCount returns how many hashes a proof for leaves [begin, end) of a
// tree of n leaves carries. It costs O(log n) and allocates nothing, so the
// decoder can check a proof's length before reading it.
func rangeHashCount(n, begin, end uint64) uint64 {
	if n == 0 || begin >= end || end > n {
		return 0
	}
	return countRange(0, n, height(n), begin, end)
}

func countRange(lo, hi uint64, l int, begin, end uint64) uint64 {
	if hi-lo == 1 {
		return 0
	}
	mid := lo + 1<<uint(l-1)
	var c uint64
	if lo < end && begin < mid {
		c += countRange(lo, mid, l-1, begin, end)
	} else {
		c++
	}
	if mid < end && begin < hi {
		c += countRange(mid, hi, subtreeLevel(hi-mid), begin, end)
	} else {
		c++
	}
	return c
}

// rangeVerifier recomputes the root of a tree from the leaf hashes of
// [begin, end) and the proof hashes, consuming them in the order collect
// produced them.
type rangeVerifier struct {
	begin, end uint64
	leaves     [][32]byte
	hashes     [][32]byte
	used       int
	short      bool
}

func (v *rangeVerifier) next() [32]byte {
	if v.used >= len(v.hashes) {
		v.short = true
		return [32]byte{}
	}
	h := v.hashes[v.used]
	v.used++
	return h
}

func (v *rangeVerifier) root(lo, hi uint64, l int) [32]byte {
	if hi-lo == 1 {
		return v.leaves[lo-v.begin]
	}
	mid := lo + 1<<uint(l-1)
	rl := subtreeLevel(hi - mid)
	leftIn, rightIn := lo < v.end && v.begin < mid, mid < v.end && v.begin < hi
	var left, right [32]byte
	if leftIn {
		left = v.root(lo, mid, l-1)
	}
	if rightIn {
		right = v.root(mid, hi, rl)
	}
	if !leftIn {
		left = v.next()
	}
	if !rightIn {
		right = v.next()
	}
	return NodeHash(left, right)
}

// Verify checks p for key k against a tree of the given size and root and
// returns whether k is present. Any inconsistency is an error: the proof is
// for another size, about another key, its bracketing leaves are not
// adjacent or do not bracket k, or it does not lead to root.
//
// Verify trusts size and root; they must come from a checkpoint whose
// signature and freshness the caller has checked (package checkpoint).
func (p *Proof) Verify(k [32]byte, size uint64, root [32]byte) (present bool, err error) {
	if p.TreeSize != size {
		return false, fmt.Errorf("%w: proof for %d leaves, checkpoint has %d", ErrSizeMismatch, p.TreeSize, size)
	}
	got, err := p.RootFor(k)
	if err != nil {
		return false, err
	}
	if got != root {
		if p.Kind == Presence {
			return false, fmt.Errorf("%w: key %x is not leaf %d of this tree", ErrRootMismatch, k[:], p.Index)
		}
		if p.Kind == AbsentEmpty {
			return false, fmt.Errorf("%w: empty-tree proof but the root is not the empty root", ErrRootMismatch)
		}
		return false, fmt.Errorf("%w: recomputed %x", ErrRootMismatch, got[:])
	}
	return p.Kind == Presence, nil
}

// RootFor checks everything about p for key k that does not need the root
// (its shape, and for an absence proof that its leaves bracket k) and
// returns the root of a tree of p.TreeSize leaves the proof leads to. The
// proof is valid for a tree with that size and root: a caller that holds a
// signature over (size, root) rather than the root itself, such as
// checkpoint.OpenDetached, checks the signature on this root. Most callers
// want Verify.
func (p *Proof) RootFor(k [32]byte) ([32]byte, error) {
	if err := p.checkShape(); err != nil {
		return [32]byte{}, err
	}
	var leaves [2][32]byte
	switch p.Kind {
	case AbsentEmpty:
		return EmptyRoot(), nil
	case Presence:
		leaves[0] = LeafHash(k)
	case AbsentBetween:
		// Adjacency comes from the shape (leaves Index and Index+1, whose
		// hashes the root fixes); ordering is checked here.
		if compareKeys(&p.Keys[0], &k) >= 0 || compareKeys(&k, &p.Keys[1]) >= 0 {
			return [32]byte{}, fmt.Errorf("%w: %x is not strictly between leaves %d and %d", ErrWrongKey, k[:], p.Index, p.Index+1)
		}
		leaves[0], leaves[1] = LeafHash(p.Keys[0]), LeafHash(p.Keys[1])
	case AbsentBelow:
		if compareKeys(&k, &p.Keys[0]) >= 0 {
			return [32]byte{}, fmt.Errorf("%w: %x is not below the first leaf", ErrWrongKey, k[:])
		}
		leaves[0] = LeafHash(p.Keys[0])
	case AbsentAbove:
		if compareKeys(&k, &p.Keys[0]) <= 0 {
			return [32]byte{}, fmt.Errorf("%w: %x is not above the last leaf", ErrWrongKey, k[:])
		}
		leaves[0] = LeafHash(p.Keys[0])
	}
	begin, end := p.leafRange()
	v := rangeVerifier{begin: begin, end: end, leaves: leaves[:end-begin], hashes: p.Hashes}
	got := v.root(0, p.TreeSize, height(p.TreeSize))
	if v.short || v.used != len(p.Hashes) {
		return [32]byte{}, fmt.Errorf("%w: wrong number of hashes", ErrMalformed)
	}
	return got, nil
}

// Binary encoding (version 1), all integers big-endian:
//
//	version   1 byte   = 1
//	kind      1 byte   Kind
//	tree size 8 bytes
//	index     8 bytes
//	keys      32 bytes each, Kind's count (0, 1 or 2)
//	hashes    32 bytes each, exactly as many as the shape requires
//
// There is no length field: the hash count follows from kind, size and
// index, and anything else (short, long, bad kind, index out of range) is an
// error.
const (
	// ProofVersion is the version byte of the binary encoding.
	ProofVersion = 1
	headerLen    = 1 + 1 + 8 + 8
	// MaxProofHashes bounds the hashes in any proof: two audit paths in a
	// tree of at most 2^64 leaves.
	MaxProofHashes = 2 * 64
)

// MarshalBinary encodes p in the versioned binary format.
func (p *Proof) MarshalBinary() ([]byte, error) {
	if err := p.checkShape(); err != nil {
		return nil, err
	}
	b := make([]byte, headerLen, headerLen+HashSize*(len(p.Keys)+len(p.Hashes)))
	b[0] = ProofVersion
	b[1] = byte(p.Kind)
	binary.BigEndian.PutUint64(b[2:], p.TreeSize)
	binary.BigEndian.PutUint64(b[10:], p.Index)
	for i := range p.Keys {
		b = append(b, p.Keys[i][:]...)
	}
	for i := range p.Hashes {
		b = append(b, p.Hashes[i][:]...)
	}
	return b, nil
}

// UnmarshalBinary decodes a proof, strictly: an unknown version or kind, an
// index that does not fit the tree size, or any missing or trailing byte is
// an error.
func (p *Proof) UnmarshalBinary(b []byte) error {
	if len(b) < headerLen {
		return fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrMalformed, len(b), headerLen)
	}
	if b[0] != ProofVersion {
		return fmt.Errorf("%w: unsupported version %d (want %d)", ErrMalformed, b[0], ProofVersion)
	}
	q := Proof{
		Kind:     Kind(b[1]),
		TreeSize: binary.BigEndian.Uint64(b[2:]),
		Index:    binary.BigEndian.Uint64(b[10:]),
	}
	nk := q.Kind.keyCount()
	rest := b[headerLen:]
	if len(rest)%HashSize != 0 {
		return fmt.Errorf("%w: %d bytes after the header is not a whole number of hashes", ErrMalformed, len(rest))
	}
	total := len(rest) / HashSize
	if total < nk || total-nk > MaxProofHashes {
		return fmt.Errorf("%w: %d hashes after the header", ErrMalformed, total)
	}
	q.Keys = make([][32]byte, nk)
	q.Hashes = make([][32]byte, total-nk)
	for i := range q.Keys {
		copy(q.Keys[i][:], rest[i*HashSize:])
	}
	for i := range q.Hashes {
		copy(q.Hashes[i][:], rest[(nk+i)*HashSize:])
	}
	if nk == 0 {
		q.Keys = nil
	}
	if err := q.checkShape(); err != nil {
		return err
	}
	*p = q
	return nil
}

// proofJSON is the JSON rendering, for people and tooling.
type proofJSON struct {
	Version  int      `json:"version"`
	Kind     string   `json:"kind"`
	Present  bool     `json:"present"`
	TreeSize uint64   `json:"tree_size"`
	Index    uint64   `json:"index"`
	Keys     []string `json:"keys,omitempty"`
	Hashes   []string `json:"hashes"`
}

// MarshalJSON renders p for people: hex hashes, the kind spelled out.
func (p *Proof) MarshalJSON() ([]byte, error) {
	j := proofJSON{
		Version:  ProofVersion,
		Kind:     p.Kind.String(),
		Present:  p.Present(),
		TreeSize: p.TreeSize,
		Index:    p.Index,
		Hashes:   make([]string, len(p.Hashes)),
	}
	for _, k := range p.Keys {
		j.Keys = append(j.Keys, hex.EncodeToString(k[:]))
	}
	for i, h := range p.Hashes {
		j.Hashes[i] = hex.EncodeToString(h[:])
	}
	return json.Marshal(j)
}
