package sortedtree

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// BuildStage names a phase of BuildFile, for progress reports.
type BuildStage string

// The stages of BuildFile, in order.
const (
	StageCopy  BuildStage = "copy"  // copying the new keys into the tree file
	StageSort  BuildStage = "sort"  // sorting them in place and removing duplicates
	StageMerge BuildStage = "merge" // merging them with the previous tree's keys
	StageHash  BuildStage = "hash"  // hashing the stored levels
	StageSync  BuildStage = "sync"  // writing the file to disk
)

// BuildProgress reports BuildFile's progress: the stage it entered and the
// time since it started.
type BuildProgress struct {
	Stage   BuildStage
	Elapsed time.Duration
}

// BuildStats says what BuildFile did.
type BuildStats struct {
	// Added is the number of keys read from the keys file.
	Added uint64
	// Keys is the size of the tree written (distinct keys); Root its root.
	Keys uint64
	Root [32]byte
	// Merged is the size of the previous tree merged in, or 0.
	Merged uint64
	// Stages gives how long each stage took, in order.
	Stages []StageTime
	// Duration is the whole build.
	Duration time.Duration
}

// StageTime is how long one stage of a build took.
type StageTime struct {
	Stage    BuildStage
	Duration time.Duration
}

// BuildFileOptions configure BuildFile.
type BuildFileOptions struct {
	// Base, if not nil, is the previous tree (usually from Open of the
	// previous file): the tree written holds its keys and the new ones,
	// and Base's keys are merged in one linear pass rather than sorted
	// again. BuildFile does not close it.
	Base *Tree
	// Progress, if not nil, is called as each stage starts.
	Progress func(BuildProgress)
}

// BuildFile writes to path the tree file (the format of WriteFile, stored
// level DefaultFileLevel) of the count keys that start at key index first
// of keysPath, a file of 32-byte keys in any order and possibly repeated,
// together with opts.Base's keys if given. It is how a tree of hundreds of
// millions of keys is built without holding them in the heap: the new keys
// are copied into the new file (by the kernel, copy_file_range), which is
// memory-mapped and sorted in place (the radix sort Build uses),
// duplicates removed in place, merged in place with Base's keys (so the
// file needs no room beyond the result), and every stored level hashed
// straight into the mapping. Its heap stays at a few megabytes. Its
// resident set stays far below the size of the file: every pass drops the
// pages it is done with (MADV_DONTNEED every 64 MiB; both files are shared
// mappings, so the data stays in the page cache and goes to disk): the
// sort's first pass behind its counting scan and behind each bucket's
// cursor, each top-level bucket once sorted, the compaction, the merge in
// both files (so a merge with a Base as large does not hold both), and the
// hashing behind each worker.
//
// Like WriteFile it writes a temporary file in the same directory, syncs
// it and renames it into place, so a reader never sees half a tree. It
// checks ctx between stages.
func BuildFile(ctx context.Context, path, keysPath string, first, count uint64, opts BuildFileOptions) (stats BuildStats, err error) {
	start := time.Now()
	stageStart := start
	stage := func(s BuildStage) {
		now := time.Now()
		if len(stats.Stages) > 0 {
			stats.Stages[len(stats.Stages)-1].Duration = now.Sub(stageStart)
		}
		stageStart = now
		stats.Stages = append(stats.Stages, StageTime{Stage: s})
		if opts.Progress != nil {
			opts.Progress(BuildProgress{Stage: s, Elapsed: now.Sub(start)})
		}
	}
	var base [][32]byte
	if opts.Base != nil {
		base = opts.Base.keys
	}
	old := uint64(len(base))
	if count > (1<<40) || first > (1<<40) {
		return stats, fmt.Errorf("sortedtree: %d keys from key %d: implausible", count, first)
	}
	src, err := os.Open(keysPath)
	if err != nil {
		return stats, fmt.Errorf("sortedtree: keys: %w", err)
	}
	defer src.Close()
	if fi, err := src.Stat(); err != nil {
		return stats, fmt.Errorf("sortedtree: keys: %w", err)
	} else if uint64(fi.Size()) < (first+count)*HashSize {
		return stats, fmt.Errorf("sortedtree: keys file %s holds %d bytes, fewer than the %d keys asked for from key %d", keysPath, fi.Size(), count, first)
	}

	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return stats, fmt.Errorf("sortedtree: building tree: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	total := old + count
	capacity := fileSize(total)
	if err := f.Truncate(int64(capacity)); err != nil {
		return stats, fmt.Errorf("sortedtree: building tree: %w", err)
	}

	// Copy the new keys behind where Base's go (copy_file_range: the
	// kernel copies, the keys never pass through this process).
	stage(StageCopy)
	if _, err := src.Seek(int64(first*HashSize), io.SeekStart); err != nil {
		return stats, fmt.Errorf("sortedtree: keys: %w", err)
	}
	if _, err := f.Seek(int64(fileHeader+old*HashSize), io.SeekStart); err != nil {
		return stats, fmt.Errorf("sortedtree: building tree: %w", err)
	}
	if n, err := f.ReadFrom(&io.LimitedReader{R: src, N: int64(count * HashSize)}); err != nil || uint64(n) != count*HashSize {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return stats, fmt.Errorf("sortedtree: copying %d keys from %s: %w", count, keysPath, err)
	}
	if err := ctx.Err(); err != nil {
		return stats, err
	}

	var mm []byte
	if capacity > 0 {
		if mm, err = syscall.Mmap(int(f.Fd()), 0, int(capacity), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); err != nil {
			return stats, fmt.Errorf("sortedtree: mapping the tree being built: %w", err)
		}
	}
	defer func() {
		if mm != nil {
			if uerr := syscall.Munmap(mm); uerr != nil && err == nil {
				err = fmt.Errorf("sortedtree: unmapping the tree being built: %w", uerr)
			}
		}
	}()
	region := bytesHashes(mm[fileHeader : fileHeader+total*HashSize])

	stage(StageSort)
	added := region[old:]
	// Drop the pages the sort and compaction are done with from this
	// process's resident set as they go (a shared file mapping: the data
	// stays in the page cache), so that sorting 100 million keys does not
	// hold all 3.2 GB of them resident; the hash pass reads them back.
	keyBytes := func(i int) int { return fileHeader + (int(old)+i)*HashSize }
	drop := func(lo, hi int) { dropPages(mm, keyBytes(lo), keyBytes(hi), 0, 0) }
	sortKeysReleasing(added, drop)
	added = compactReleasing(added, drop)
	if err := ctx.Err(); err != nil {
		return stats, err
	}

	keys := added
	if old > 0 {
		stage(StageMerge)
		// Drop the pages merged so far from this process's resident set as
		// it goes, in both files: both are shared file mappings, so the
		// data stays in the page cache (and goes to disk), and a merge of
		// two 100-million-key files does not hold both resident at once.
		var baseMM []byte
		if opts.Base != nil {
			baseMM = opts.Base.mm
		}
		var doneDst, doneBase int
		release := func(k, i int) {
			doneDst = dropPages(mm, fileHeader+doneDst*HashSize, fileHeader+k*HashSize, doneDst, k)
			if baseMM != nil {
				doneBase = dropPages(baseMM, fileHeader+doneBase*HashSize, fileHeader+i*HashSize, doneBase, i)
			}
		}
		keys = mergeInPlace(region[:old+uint64(len(added))], base, release)
		if err := ctx.Err(); err != nil {
			return stats, err
		}
	}
	n := uint64(len(keys))

	stage(StageHash)
	var root [32]byte
	switch {
	case n == 0:
		root = EmptyRoot()
	case height(n) < DefaultFileLevel:
		buf := make([][32]byte, 1<<DefaultFileLevel)
		root = chunkRoot(keys, buf)
	default:
		off := uint64(fileHeader) + n*HashSize
		var below [][32]byte
		for l := DefaultFileLevel; l <= height(n); l++ {
			w := width(n, l)
			lv := bytesHashes(mm[off : off+w*HashSize])
			if below == nil {
				// Drop the keys' pages behind the hashing too.
				fillChunksReleasing(keys, l, lv, func(lo, hi int) {
					dropPages(mm, fileHeader+lo*HashSize, fileHeader+hi*HashSize, 0, 0)
				})
			} else {
				reduceInto(below, lv)
			}
			below = lv
			off += w * HashSize
		}
		root = below[0]
	}
	hdr := mm[:fileHeader]
	clear(hdr)
	copy(hdr, fileMagic)
	binary.BigEndian.PutUint32(hdr[8:], fileVersion)
	hdr[12] = DefaultFileLevel
	binary.BigEndian.PutUint64(hdr[16:], n)
	copy(hdr[24:], root[:])
	if err := ctx.Err(); err != nil {
		return stats, err
	}

	stage(StageSync)
	if err := syscall.Munmap(mm); err != nil {
		mm = nil
		return stats, fmt.Errorf("sortedtree: unmapping the tree being built: %w", err)
	}
	mm = nil
	if err := f.Truncate(int64(fileSize(n))); err != nil {
		return stats, fmt.Errorf("sortedtree: building tree: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		return stats, fmt.Errorf("sortedtree: building tree: %w", err)
	}
	if err := f.Sync(); err != nil {
		return stats, fmt.Errorf("sortedtree: building tree: %w", err)
	}
	if err := f.Close(); err != nil {
		return stats, fmt.Errorf("sortedtree: building tree: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return stats, fmt.Errorf("sortedtree: building tree: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	stats.Stages[len(stats.Stages)-1].Duration = time.Since(stageStart)
	stats.Added, stats.Keys, stats.Root, stats.Merged = count, n, root, old
	stats.Duration = time.Since(start)
	return stats, nil
}

// fileSize is the size of a tree file of n keys at DefaultFileLevel.
func fileSize(n uint64) uint64 {
	size := uint64(fileHeader) + n*HashSize
	if n > 0 && height(n) >= DefaultFileLevel {
		for l := DefaultFileLevel; l <= height(n); l++ {
			size += width(n, l) * HashSize
		}
	}
	return size
}

// mergeInPlace merges base (sorted, distinct) with the m sorted, distinct
// keys at the end of dst (dst[len(base):], len(dst) = len(base)+m) into the
// front of dst. It runs forwards: after taking a keys from base and b from
// the new keys it writes position a+b, and the next unread new key is at
// len(base)+b, never below it, so no key is overwritten before it is read.
// A key in both is written once; the merged keys, dst[:k], are returned.
//
// release, if not nil, is called every releaseEvery keys written with the
// number written (k) and taken from base (i): what is below is done with.
func mergeInPlace(dst, base [][32]byte, release func(k, i int)) [][32]byte {
	i, j, k := 0, len(base), 0
	for i < len(base) && j < len(dst) {
		if release != nil && k%releaseEvery == 0 {
			release(k, i)
		}
		switch c := compareKeys(&base[i], &dst[j]); {
		case c < 0:
			dst[k] = base[i]
			i++
		case c > 0:
			dst[k] = dst[j]
			j++
		default:
			dst[k] = base[i]
			i++
			j++
		}
		k++
	}
	for ; i < len(base); i++ {
		dst[k] = base[i]
		k++
	}
	for ; j < len(dst); j++ {
		dst[k] = dst[j]
		k++
	}
	return dst[:k]
}

// releaseEvery is how many keys the sort, compaction, merge and hashing
// of BuildFile, and Open's fill, go through between two releases of the
// pages they are done with: 64 MiB. A variable for tests.
var releaseEvery = 1 << 21

// dropPages advises the kernel that the whole pages of mm in [from, to)
// will not be needed (MADV_DONTNEED: for a shared file mapping the data
// stays in the page cache; only this process's resident set shrinks), and
// returns next if it did, done otherwise (nothing whole to drop yet). It is
// a hint: an error is ignored.
func dropPages(mm []byte, from, to, done, next int) int {
	page := os.Getpagesize()
	lo := (from + page - 1) / page * page
	hi := to / page * page
	if hi <= lo || hi > len(mm) {
		return done
	}
	syscall.Madvise(mm[lo:hi], syscall.MADV_DONTNEED)
	return next
}

// compactReleasing is slices.Compact (keys sorted: adjacent duplicates
// removed, in place) calling done(0, k) every releaseEvery keys with the k
// keys written so far, below which nothing is read or written again.
func compactReleasing(keys [][32]byte, done func(lo, hi int)) [][32]byte {
	if len(keys) < 2 {
		return keys
	}
	k, last := 1, 0
	for i := 1; i < len(keys); i++ {
		if keys[i] != keys[k-1] {
			if k != i {
				keys[k] = keys[i]
			}
			k++
		}
		if done != nil && k-last >= releaseEvery {
			done(last, k-1)
			last = k - 1
		}
	}
	return keys[:k]
}

// fillChunksReleasing is fillChunks calling done(lo, hi) for key ranges
// every worker is done hashing, every releaseEvery keys; done is called
// from several goroutines at once, for disjoint ranges.
func fillChunksReleasing(keys [][32]byte, low int, out [][32]byte, done func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if len(out) < 4096 || workers < 2 {
		workers = 1
	}
	var wg sync.WaitGroup
	step := (len(out) + workers - 1) / workers
	per := max(1, releaseEvery>>uint(low)) // chunks between releases
	for lo := 0; lo < len(out); lo += step {
		hi := min(lo+step, len(out))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := lo; a < hi; a += per {
				b := min(a+per, hi)
				fillRange(keys, low, out, a, b)
				done(a<<uint(low), min(b<<uint(low), len(keys)))
			}
		}()
	}
	wg.Wait()
}

// reduceInto computes into up the level above lv.
func reduceInto(lv, up [][32]byte) {
	for j := range up {
		if 2*j+1 < len(lv) {
			up[j] = NodeHash(lv[2*j], lv[2*j+1])
		} else {
			up[j] = lv[2*j]
		}
	}
}
