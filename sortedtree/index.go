package sortedtree

import (
	"encoding/binary"
	"math/bits"
	"sync"
	"sync/atomic"
)

// indexStride is how many keys one index entry stands for: 128 keys are
// 4 KiB, one page of the tree file.
const indexStride = 128

// prefixIndex holds the first 8 bytes of every indexStride-th key, so that
// a search first narrows to a page of keys in a small array that stays in
// cache (n/16 bytes) instead of touching a cold page at every step of a
// binary search over all keys, which is what dominates proof generation in
// trees of hundreds of millions of keys.
type prefixIndex struct {
	first []uint64
	ready atomic.Bool // first is complete and may be read
	stop  atomic.Bool
	wg    sync.WaitGroup // the fill, and Open's prefault of the stored levels
	// touched keeps the result of Open's prefault, so that its reads
	// are not optimized away.
	touched byte
}

func prefix(k *[32]byte) uint64 { return binary.BigEndian.Uint64(k[:8]) }

// newIndex indexes keys, now or (background) in a goroutine, for trees
// that must open without reading every page first. The index reads one
// key of every page; drop, if not nil, is called every releaseEvery keys
// with the range it is done with, so that indexing a mapped file does not
// leave every page of it resident.
func newIndex(keys [][32]byte, background bool, drop func(lo, hi uint64)) *prefixIndex {
	ix := &prefixIndex{first: make([]uint64, (len(keys)+indexStride-1)/indexStride)}
	fill := func() {
		per := max(1, releaseEvery/indexStride)
		for j := range ix.first {
			if j%4096 == 0 && ix.stop.Load() {
				return
			}
			if drop != nil && j%per == 0 && j > 0 {
				drop(uint64((j-per)*indexStride), uint64(j*indexStride))
			}
			ix.first[j] = prefix(&keys[j*indexStride])
		}
		if drop != nil && len(ix.first) > 0 {
			j := len(ix.first)
			drop(uint64((j-1)/per*per*indexStride), uint64(len(keys)))
		}
		ix.ready.Store(true)
	}
	if !background {
		fill()
		return ix
	}
	ix.wg.Add(1)
	go func() {
		defer ix.wg.Done()
		fill()
	}()
	return ix
}

// bounds returns a range [lo, hi) of key positions that contains the first
// key >= k (or hi, if every key in range is smaller), or the whole tree if
// the index is not ready yet.
func (ix *prefixIndex) bounds(k *[32]byte, n int) (lo, hi int) {
	if ix == nil || !ix.ready.Load() {
		return 0, n
	}
	p := prefix(k)
	f := ix.first
	// j1: first entry >= p; j2: first entry > p. Keys before block j1-1
	// are below k and the first key of block j2 is above it. Keys are
	// hashes, spread evenly, so the search starts where p falls in
	// proportion and gallops from there: it touches a few cache lines
	// around that place instead of a binary search's twenty, spread
	// over the whole index (at 100 million keys, 6 MB and 1,500 pages).
	// Skewed keys only make the gallop longer.
	guess, _ := bits.Mul64(p, uint64(len(f)))
	j1 := gallop(f, p, false, int(guess))
	j2 := gallop(f, p, true, j1)
	if j1 > 0 {
		lo = (j1 - 1) * indexStride
	}
	return lo, min(j2*indexStride, n)
}

// gallop returns the first i with f[i] >= p (f[i] > p if strict), or
// len(f), searching f (ascending) outwards from g with doubling steps,
// then by bisection between the last two places it looked.
func gallop(f []uint64, p uint64, strict bool, g int) int {
	below := func(x uint64) bool {
		if strict {
			return x <= p
		}
		return x < p
	}
	if len(f) == 0 {
		return 0
	}
	g = min(max(g, 0), len(f)-1)
	// Invariant: every entry before lo is below, and hi is len(f) or an
	// entry that is not.
	lo, hi := 0, len(f)
	if below(f[g]) {
		lo = g + 1
		for step := 1; lo+step-1 < len(f); step *= 2 {
			if !below(f[lo+step-1]) {
				hi = lo + step - 1
				break
			}
			lo += step
		}
	} else {
		hi = g
		for step := 1; hi-step >= 0; step *= 2 {
			if below(f[hi-step]) {
				lo = hi - step + 1
				break
			}
			hi -= step
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if below(f[m]) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (ix *prefixIndex) close() {
	if ix != nil {
		ix.stop.Store(true)
		ix.wg.Wait()
	}
}
