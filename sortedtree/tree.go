// Package sortedtree implements a sorted Merkle tree: an RFC 6962 hash tree
// whose leaves are 32-byte keys in strictly ascending order. Because the
// leaves are sorted, the tree proves not only that a key is in the set (a
// presence proof: one audit path) but also that a key is not (an absence
// proof: the two adjacent leaves that bracket it, with their positions), which
// is what the PEC paper's improved Certificate Transparency and its
// revocation authority need.
//
// Hashing follows RFC 6962 exactly: leaf = SHA-256(0x00 || key), node =
// SHA-256(0x01 || left || right), and a tree whose size is not a power of two
// splits at the largest power of two smaller than its size. A presence proof
// is therefore an ordinary RFC 6962 inclusion path for the leaf key, and
// standard tooling can check it.
//
// A Tree keeps the keys and every level of interior hashes from a cut-off
// level upwards as flat arrays of 32-byte values; the lowest levels are
// recomputed on demand, which costs a handful of hashes per proof and saves
// most of the memory a full tree would need. Trees persist to a compact,
// versioned file (see docs/formats/proofs.md) that Open memory-maps.
package sortedtree

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// HashSize is the size of a key and of every node hash.
const HashSize = 32

// CacheLevel is the lowest level of interior hashes a Tree keeps. Level 0 is
// the leaf hashes, level 1 covers pairs of leaves, level 2 groups of four:
// keeping levels 2 and up costs about n/2 hashes (half the size of the keys)
// and leaves at most four extra hashes to compute per audit path (the leaf
// sibling, and the pair next to it: two leaf hashes and their parent).
const CacheLevel = 2

// Leaf and node prefixes from RFC 6962 §2.1: they separate leaf hashes from
// interior hashes so that a leaf can never be passed off as a node.
const (
	leafPrefix = 0x00
	nodePrefix = 0x01
)

// LeafHash returns the RFC 6962 leaf hash of key: SHA-256(0x00 || key).
func LeafHash(key [32]byte) [32]byte {
	var b [1 + HashSize]byte
	b[0] = leafPrefix
	copy(b[1:], key[:])
	return sha256.Sum256(b[:])
}

// NodeHash returns the RFC 6962 interior hash SHA-256(0x01 || left || right).
func NodeHash(left, right [32]byte) [32]byte {
	var b [1 + 2*HashSize]byte
	b[0] = nodePrefix
	copy(b[1:], left[:])
	copy(b[1+HashSize:], right[:])
	return sha256.Sum256(b[:])
}

// EmptyRoot returns the root of the empty tree, SHA-256 of the empty string
// (RFC 6962 §2.1).
func EmptyRoot() [32]byte { return sha256.Sum256(nil) }

// Tree is an immutable sorted Merkle tree. Its methods are safe for
// concurrent use, except Close, which must not run concurrently with anything
// else.
type Tree struct {
	keys [][32]byte
	// levels[i] holds level low+i: level l has width(n, l) nodes, node j
	// covering leaves [j<<l, min((j+1)<<l, n)). Stored up to and including
	// the root level when that is at or above low.
	levels [][][32]byte
	low    int
	root   [32]byte
	mm     []byte // the memory-mapped file behind keys (and some levels), if any
	cache  *cache // levels a file leaves out, filled in the background
	index  *prefixIndex
	ready  chan struct{} // closed when background work is done; nil: none
}

// width returns the number of nodes at level l of a tree of n leaves.
func width(n uint64, l int) uint64 {
	if n == 0 {
		return 0
	}
	return (n-1)>>uint(l) + 1
}

// height returns the level of the root of a tree of n >= 1 leaves.
func height(n uint64) int { return bits.Len64(n - 1) }

// compareKeys orders keys as big-endian numbers, which is bytes.Compare order.
func compareKeys(a, b *[32]byte) int {
	for i := 0; i < HashSize; i += 8 {
		x, y := binary.BigEndian.Uint64(a[i:]), binary.BigEndian.Uint64(b[i:])
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Build sorts keys, removes duplicates and builds the tree. Build takes
// ownership of keys: it sorts the slice in place and the tree keeps it, so the
// caller must not modify it afterwards. Sorting in place keeps the peak
// memory of building a tree of n keys at about 48n bytes.
func Build(keys [][32]byte) *Tree {
	sortKeys(keys)
	keys = slices.Compact(keys)
	keys = slices.Clip(keys)
	t := &Tree{keys: keys, low: CacheLevel, index: newIndex(keys, false, nil)}
	t.levels = buildLevels(keys, CacheLevel, nil)
	t.root = t.computeRoot()
	return t
}

// Merge returns a new tree holding t's keys and the keys in add, as
// Build(append(t's keys, add...)) would, but without sorting t's keys again:
// it sorts add (in place: Merge takes ownership of it, as Build does) and
// merges, so a prover that receives a few new keys pays one linear pass and
// the hashing instead of a full sort. t is unchanged and stays usable.
func (t *Tree) Merge(add [][32]byte) *Tree {
	sortKeys(add)
	add = slices.Compact(add)
	old := t.keys
	keys := make([][32]byte, 0, len(old)+len(add))
	i, j := 0, 0
	for i < len(old) && j < len(add) {
		switch c := compareKeys(&old[i], &add[j]); {
		case c < 0:
			keys = append(keys, old[i])
			i++
		case c > 0:
			keys = append(keys, add[j])
			j++
		default:
			keys = append(keys, old[i])
			i++
			j++
		}
	}
	keys = append(keys, old[i:]...)
	keys = append(keys, add[j:]...)
	nt := &Tree{keys: keys, low: CacheLevel, index: newIndex(keys, false, nil)}
	nt.levels = buildLevels(keys, CacheLevel, nil)
	nt.root = nt.computeRoot()
	return nt
}

// buildLevels computes levels low..height(n) of the tree over keys. If have
// is non-nil it already holds levels from some level above low upwards (for
// example from a file) and only the levels below it are computed; the result
// then contains the new levels followed by have.
func buildLevels(keys [][32]byte, low int, have [][][32]byte) [][][32]byte {
	n := uint64(len(keys))
	if n == 0 {
		return nil
	}
	top := height(n)
	if top < low {
		return nil
	}
	stop := top + 1
	if have != nil {
		stop = top + 1 - len(have)
	}
	var levels [][][32]byte
	if low < stop {
		base := make([][32]byte, width(n, low))
		fillChunks(keys, low, base)
		levels = append(levels, base)
		for l := low + 1; l < stop; l++ {
			levels = append(levels, reduce(levels[len(levels)-1]))
		}
	}
	return append(levels, have...)
}

// fillChunks sets out[j] to the hash of the subtree over leaves
// [j<<low, (j+1)<<low), computed from the keys, using every CPU: this is the
// bulk of the hashing in a build.
func fillChunks(keys [][32]byte, low int, out [][32]byte) {
	workers := runtime.GOMAXPROCS(0)
	if len(out) < 4096 || workers < 2 {
		fillRange(keys, low, out, 0, len(out))
		return
	}
	var wg sync.WaitGroup
	step := (len(out) + workers - 1) / workers
	for lo := 0; lo < len(out); lo += step {
		hi := min(lo+step, len(out))
		wg.Add(1)
		go func() {
			defer wg.Done()
			fillRange(keys, low, out, lo, hi)
		}()
	}
	wg.Wait()
}

func fillRange(keys [][32]byte, low int, out [][32]byte, lo, hi int) {
	buf := make([][32]byte, 1<<uint(low))
	for j := lo; j < hi; j++ {
		a := j << uint(low)
		b := min(a+1<<uint(low), len(keys))
		out[j] = chunkRoot(keys[a:b], buf)
	}
}

// chunkRoot returns the RFC 6962 hash of the leaves keys, an aligned chunk of
// at most len(buf) keys (fewer only for the last chunk of the tree, where the
// odd node out at each level is carried up unchanged, which is exactly the
// RFC 6962 split for the right edge of the tree).
func chunkRoot(keys [][32]byte, buf [][32]byte) [32]byte {
	m := len(keys)
	for i := range keys {
		buf[i] = LeafHash(keys[i])
	}
	for m > 1 {
		h := 0
		for i := 0; i+1 < m; i += 2 {
			buf[h] = NodeHash(buf[i], buf[i+1])
			h++
		}
		if m%2 == 1 {
			buf[h] = buf[m-1]
			h++
		}
		m = h
	}
	return buf[0]
}

// reduce computes the level above lv.
func reduce(lv [][32]byte) [][32]byte {
	up := make([][32]byte, (len(lv)+1)/2)
	for j := range up {
		if 2*j+1 < len(lv) {
			up[j] = NodeHash(lv[2*j], lv[2*j+1])
		} else {
			up[j] = lv[2*j]
		}
	}
	return up
}

func (t *Tree) computeRoot() [32]byte {
	n := t.Size()
	if n == 0 {
		return EmptyRoot()
	}
	return t.node(height(n), 0)
}

// node returns the hash of node j at level l, from the stored levels if it is
// there and otherwise by hashing its children.
func (t *Tree) node(l int, j uint64) [32]byte {
	if i := l - t.low; i >= 0 && i < len(t.levels) {
		return t.levels[i][j]
	}
	if t.cache != nil {
		if h, ok := t.cache.get(l, j); ok {
			return h
		}
	}
	if l == 0 {
		return LeafHash(t.keys[j])
	}
	left := t.node(l-1, 2*j)
	if 2*j+1 < width(t.Size(), l-1) {
		return NodeHash(left, t.node(l-1, 2*j+1))
	}
	return left
}

// MemoryBytes returns the bytes the tree's keys and stored levels occupy,
// whether in the heap or in its memory-mapped file.
func (t *Tree) MemoryBytes() uint64 {
	b := uint64(len(t.keys)) * HashSize
	for _, lv := range t.levels {
		b += uint64(len(lv)) * HashSize
	}
	if t.cache != nil {
		b += t.cache.bytes()
	}
	return b
}

// closedChan is returned by Ready for trees with nothing to fill.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Ready returns a channel that is closed once the tree runs at full speed. A
// tree from Build is ready at once; a tree from Open whose file leaves out
// low levels fills them in the background (about a second per 10 million
// keys on two cores) and indexes the keys, and until then proofs cost more
// hashing and searching.
func (t *Tree) Ready() <-chan struct{} {
	if t.ready == nil {
		return closedChan
	}
	return t.ready
}

// Size returns the number of keys in the tree.
func (t *Tree) Size() uint64 { return uint64(len(t.keys)) }

// Root returns the tree's root hash; for the empty tree, the RFC 6962 empty
// root (SHA-256 of the empty string).
func (t *Tree) Root() [32]byte { return t.root }

// Key returns the i-th smallest key. It panics if i >= Size().
func (t *Tree) Key(i uint64) [32]byte { return t.keys[i] }

// AppendKeys appends every key, in ascending order, to dst and returns it,
// for callers that build the next version of a tree from this one.
func (t *Tree) AppendKeys(dst [][32]byte) [][32]byte { return append(dst, t.keys...) }

// search returns the index of the first key >= k and whether it equals k.
func (t *Tree) search(k *[32]byte) (uint64, bool) {
	lo, hi := t.index.bounds(k, len(t.keys))
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compareKeys(&t.keys[m], k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return uint64(lo), lo < len(t.keys) && t.keys[lo] == *k
}

// Contains reports whether k is in the tree.
func (t *Tree) Contains(k [32]byte) bool {
	_, ok := t.search(&k)
	return ok
}

// Check re-hashes the whole tree and reports the first problem: keys that are
// not strictly ascending (unsorted or duplicated) or a stored hash that does
// not match the keys below it. A tree from Build always passes; Check is for
// trees loaded from files and for audits.
func (t *Tree) Check() error {
	for i := 1; i < len(t.keys); i++ {
		if c := compareKeys(&t.keys[i-1], &t.keys[i]); c >= 0 {
			if c == 0 {
				return &KeyOrderError{Index: uint64(i), Duplicate: true}
			}
			return &KeyOrderError{Index: uint64(i)}
		}
	}
	fresh := &Tree{keys: t.keys, low: t.low}
	fresh.levels = buildLevels(t.keys, t.low, nil)
	for i := range t.levels {
		if len(fresh.levels) <= i || len(fresh.levels[i]) != len(t.levels[i]) {
			return errors.New("sortedtree: stored levels do not match the tree's size")
		}
		for j := range t.levels[i] {
			if fresh.levels[i][j] != t.levels[i][j] {
				return &HashMismatchError{Level: t.low + i, Index: uint64(j)}
			}
		}
	}
	if fresh.computeRoot() != t.root {
		return errors.New("sortedtree: root does not match the keys")
	}
	return nil
}
