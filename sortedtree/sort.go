package sortedtree

import (
	"encoding/binary"
	"slices"
)

// sortKeys sorts keys in place in ascending order. Keys are usually hashes
// and so spread evenly; an in-place radix pass on the top 16 bits (American
// flag sort) splits them into 65,536 buckets that are then sorted one by one
// with a comparison sort, several times faster than a comparison sort of the
// whole slice and with no extra memory. Skewed input stays correct: a bucket
// holding everything just falls back to the comparison sort.
func sortKeys(keys [][32]byte) {
	if len(keys) < 1<<16 {
		slices.SortFunc(keys, func(a, b [32]byte) int { return compareKeys(&a, &b) })
		return
	}
	const buckets = 1 << 16
	bucket := func(k *[32]byte) int { return int(binary.BigEndian.Uint16(k[:2])) }
	var count [buckets]int
	for i := range keys {
		count[bucket(&keys[i])]++
	}
	var start, next [buckets]int
	sum := 0
	for b := range count {
		start[b] = sum
		next[b] = sum
		sum += count[b]
	}
	for b := 0; b < buckets; b++ {
		end := start[b] + count[b]
		for next[b] < end {
			// Swap the key at next[b] into its bucket until one that
			// belongs here comes back.
			k := &keys[next[b]]
			d := bucket(k)
			if d == b {
				next[b]++
				continue
			}
			keys[next[d]], *k = *k, keys[next[d]]
			next[d]++
		}
	}
	for b := 0; b < buckets; b++ {
		part := keys[start[b] : start[b]+count[b]]
		slices.SortFunc(part, func(a, b [32]byte) int { return compareKeys(&a, &b) })
	}
}
