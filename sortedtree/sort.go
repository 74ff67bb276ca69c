package sortedtree

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// smallSort is the size below which radix passes give way to insertion sort.
const smallSort = 48

// sortKeys sorts keys in place in ascending order with a most-significant-
// byte-first radix sort (American flag sort): each pass counts the keys per
// value of one byte, swaps every key into its bucket in place, and recurses
// into the buckets with the next byte. Keys are usually hashes, so after two
// passes buckets are a few dozen keys, which insertion sort finishes. There
// is no extra memory, every pass touches at most 256 write positions (so it
// stays in cache, unlike one wide pass), and skewed input only costs more
// passes: at most 32, one per byte. The top-level buckets are sorted by all
// CPUs in parallel.
func sortKeys(keys [][32]byte) { sortKeysReleasing(keys, nil) }

// sortKeysReleasing is sortKeys calling done(lo, hi), if not nil, for
// ranges of keys it will not touch again: positions finalized by the first
// pass as it goes, and each top-level bucket once sorted. BuildFile drops
// those pages of its file mapping, so that sorting a mapped file does not
// hold it all resident. done may be called from several goroutines at once,
// for disjoint ranges.
func sortKeysReleasing(keys [][32]byte, done func(lo, hi int)) {
	if len(keys) <= smallSort {
		insertionSort(keys)
		if done != nil {
			done(0, len(keys))
		}
		return
	}
	bounds := flagPassReleasing(keys, 0, done)
	workers := runtime.GOMAXPROCS(0)
	if len(keys) < 1<<16 || workers < 2 {
		for b := 0; b < 256; b++ {
			radixSort(keys[bounds[b]:bounds[b+1]], 1)
			if done != nil {
				done(bounds[b], bounds[b+1])
			}
		}
		return
	}
	var next atomic.Int32
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := int(next.Add(1) - 1); b < 256; b = int(next.Add(1) - 1) {
				radixSort(keys[bounds[b]:bounds[b+1]], 1)
				if done != nil {
					done(bounds[b], bounds[b+1])
				}
			}
		}()
	}
	wg.Wait()
}

// radixSort sorts keys, which agree on their first d bytes.
func radixSort(keys [][32]byte, d int) {
	for len(keys) > smallSort && d < HashSize {
		bounds := flagPass(keys, d)
		// Recurse into all buckets but the largest, and loop on that one,
		// so the stack stays shallow on skewed input.
		big := 0
		for b := 1; b < 256; b++ {
			if bounds[b+1]-bounds[b] > bounds[big+1]-bounds[big] {
				big = b
			}
		}
		for b := 0; b < 256; b++ {
			if b != big {
				radixSort(keys[bounds[b]:bounds[b+1]], d+1)
			}
		}
		keys = keys[bounds[big]:bounds[big+1]]
		d++
	}
	if d < HashSize {
		insertionSort(keys)
	}
}

// flagPass permutes keys in place so that they are grouped by byte d in
// ascending order, and returns the 257 bucket boundaries.
func flagPass(keys [][32]byte, d int) (bounds [257]int) { return flagPassReleasing(keys, d, nil) }

// flagPassReleasing is flagPass calling done(lo, hi), if not nil, for the
// ranges it is done with: behind the counting scan, and, during the swaps,
// each bucket's finalized prefix [bounds[b], next[b]), which no later swap
// touches (swaps only read at the current bucket's cursor and write at the
// cursors).
func flagPassReleasing(keys [][32]byte, d int, done func(lo, hi int)) (bounds [257]int) {
	var count [256]int
	last := 0
	for i := range keys {
		count[keys[i][d]]++
		if done != nil && i-last >= releaseEvery {
			done(last, i)
			last = i
		}
	}
	if done != nil {
		done(last, len(keys))
	}
	var next [256]int
	sum := 0
	for b := range count {
		bounds[b] = sum
		next[b] = sum
		sum += count[b]
	}
	bounds[256] = sum
	var released [256]int // per bucket, the end of what done was given
	if done != nil {
		released = next
	}
	moved := 0
	for b := 0; b < 256; b++ {
		end := bounds[b+1]
		for next[b] < end {
			if done != nil {
				if moved++; moved >= releaseEvery {
					moved = 0
					for t := range next {
						if next[t] > released[t] {
							done(released[t], next[t])
							released[t] = next[t]
						}
					}
				}
			}
			// Swap the key at next[b] into its own bucket until one that
			// belongs here arrives.
			k := &keys[next[b]]
			t := int(k[d])
			if t == b {
				next[b]++
				continue
			}
			keys[next[t]], *k = *k, keys[next[t]]
			next[t]++
		}
	}
	return bounds
}

func insertionSort(keys [][32]byte) {
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && compareKeys(&keys[j], &keys[j-1]) < 0; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}
