package sortedtree

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
)

// cache holds, for a tree opened from a file that stores levels from
// chunkLevel up, the levels CacheLevel..chunkLevel-1 the file leaves out.
// Background goroutines fill it one chunk (the 1<<chunkLevel leaves under
// one stored node) at a time, so Open returns at once; until a chunk is
// ready, proofs touching it hash its leaves directly: correct, just slower.
//
// Each chunk's hashes are written before its ready bit is set (an atomic OR,
// a release) and read only after the bit is seen (an atomic load, an
// acquire), so readers never see a half-written chunk.
type cache struct {
	chunkLevel int
	levels     [][][32]byte // levels[i] is level CacheLevel+i
	ready      []atomic.Uint64
	filled     atomic.Bool // every chunk is ready
	maps       [][]byte    // anonymous mappings behind levels, unmapped at close
	stop       atomic.Bool
	wg         sync.WaitGroup
	done       chan struct{}
}

// newCache starts filling the missing levels of t, whose stored levels
// start at chunkLevel.
func newCache(t *Tree, chunkLevel int) *cache {
	n := t.Size()
	c := &cache{chunkLevel: chunkLevel, done: make(chan struct{})}
	for l := CacheLevel; l < chunkLevel && l <= height(n); l++ {
		// Fresh mappings are untouched zero pages: memory is only
		// committed as chunks fill.
		lv, mm := hugeHashes(width(n, l))
		c.levels = append(c.levels, lv)
		if mm != nil {
			c.maps = append(c.maps, mm)
		}
	}
	chunks := width(n, chunkLevel)
	c.ready = make([]atomic.Uint64, (chunks+63)/64)
	workers := uint64(runtime.GOMAXPROCS(0))
	if chunks < 64 {
		workers = 1
	}
	step := (chunks + workers - 1) / workers
	for lo := uint64(0); lo < chunks; lo += step {
		hi := min(lo+step, chunks)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.fill(t.keys, lo, hi, t.dropKeys)
		}()
	}
	go func() {
		c.wg.Wait()
		if !c.stop.Load() {
			c.filled.Store(true)
		}
		close(c.done)
	}()
	return c
}

// hugeHashes returns room for n hashes in an anonymous mapping the kernel
// is asked to back with huge pages (MADV_HUGEPAGE), and the mapping to
// unmap; if mapping fails, a heap slice and nil. Proofs read one node of
// each cached level at random: at 100 million keys the levels are 1.5 GB,
// and with 4 KiB pages nearly every read is a TLB miss, which in a virtual
// machine costs a two-dimensional page walk; 2 MiB pages keep the levels'
// translations in the TLB. (The Go heap does not ask for huge pages.)
func hugeHashes(n uint64) ([][32]byte, []byte) {
	size := int(n * HashSize)
	if size < 4<<20 {
		return make([][32]byte, n), nil
	}
	mm, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return make([][32]byte, n), nil
	}
	syscall.Madvise(mm, syscall.MADV_HUGEPAGE) // a hint: an error is ignored
	return bytesHashes(mm), mm
}

// fill computes chunks [lo, hi), calling drop for the keys it is done
// with every releaseEvery keys: the fill reads every key once, and a tree
// of 100 million keys should not stay 3.2 GB resident for it (proofs
// page back in the few keys they search).
func (c *cache) fill(keys [][32]byte, lo, hi uint64, drop func(lo, hi uint64)) {
	n := uint64(len(keys))
	buf := make([][32]byte, 1<<CacheLevel)
	per := max(1, uint64(releaseEvery)>>uint(c.chunkLevel))
	for ch := lo; ch < hi; ch++ {
		if c.stop.Load() {
			return
		}
		if (ch-lo)%per == 0 && ch > lo {
			drop((ch-per)<<uint(c.chunkLevel), min(ch<<uint(c.chunkLevel), n))
		}
		for i, lv := range c.levels {
			l := CacheLevel + i
			shift := uint(c.chunkLevel - l)
			a, b := ch<<shift, min((ch+1)<<shift, uint64(len(lv)))
			for j := a; j < b; j++ {
				if i == 0 {
					k0 := j << CacheLevel
					lv[j] = chunkRoot(keys[k0:min(k0+1<<CacheLevel, n)], buf)
					continue
				}
				below := c.levels[i-1]
				if 2*j+1 < uint64(len(below)) {
					lv[j] = NodeHash(below[2*j], below[2*j+1])
				} else {
					lv[j] = below[2*j]
				}
			}
		}
		c.ready[ch/64].Or(1 << (ch % 64))
	}
	if hi > lo {
		from := lo
		if k := (hi - lo) % per; k != 0 {
			from = hi - k
		} else {
			from = hi - per
		}
		drop(max(from, lo)<<uint(c.chunkLevel), min(hi<<uint(c.chunkLevel), n))
	}
}

// get returns node j of level l if the cache holds it and its chunk is
// filled.
func (c *cache) get(l int, j uint64) ([32]byte, bool) {
	i := l - CacheLevel
	if i < 0 || i >= len(c.levels) {
		return [32]byte{}, false
	}
	ch := j >> uint(c.chunkLevel-l)
	if c.ready[ch/64].Load()&(1<<(ch%64)) == 0 {
		return [32]byte{}, false
	}
	return c.levels[i][j], true
}

// close stops the fill, waits for it and unmaps the levels.
func (c *cache) close() {
	c.stop.Store(true)
	c.wg.Wait()
	for _, mm := range c.maps {
		syscall.Munmap(mm)
	}
	c.maps, c.levels = nil, nil
}

func (c *cache) bytes() uint64 {
	var b uint64
	for _, lv := range c.levels {
		b += uint64(len(lv)) * HashSize
	}
	return b
}
