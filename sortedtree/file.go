package sortedtree

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// File format (version 1), all integers big-endian; see docs/formats/proofs.md.
//
//	offset size
//	0      8    magic "pkie-smt"
//	8      4    version = 1
//	12     1    stored level L: levels L and up are in the file
//	13     3    zero
//	16     8    n, the number of keys
//	24     32   root hash
//	56     8    zero
//	64     32n  keys, strictly ascending
//	...         levels L, L+1, ..., height(n), each width(n, l) hashes of 32
//	            bytes (no levels at all if height(n) < L)
const (
	fileMagic   = "pkie-smt"
	fileVersion = 1
	fileHeader  = 64
	// DefaultFileLevel is the stored level WriteFile uses. Levels 7 and up
	// add 1/64 of the keys' size to the file (a 2.1M-key tree is 68.2 MB of
	// keys and 1.1 MB of hashes); Open recomputes levels CacheLevel..6.
	DefaultFileLevel = 7
	maxFileLevel     = 32
)

// ErrFormat reports a tree file that is not in the expected format.
var ErrFormat = errors.New("sortedtree: bad tree file")

// WriteFile writes the tree to path in the compact file format, storing
// interior levels from DefaultFileLevel up. It writes a temporary file in
// the same directory and renames it into place, so readers never see half a
// tree.
func (t *Tree) WriteFile(path string) error { return t.WriteFileLevel(path, DefaultFileLevel) }

// WriteFileLevel is WriteFile storing interior levels from level up: a lower
// level makes the file bigger (level CacheLevel stores n/2 hashes, half the
// keys' size again) and Open faster, since Open then only maps the file.
func (t *Tree) WriteFileLevel(path string, level int) (err error) {
	if level < 0 || level > maxFileLevel {
		return fmt.Errorf("sortedtree: stored level %d out of range 0..%d", level, maxFileLevel)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("sortedtree: writing tree: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var hdr [fileHeader]byte
	copy(hdr[:], fileMagic)
	binary.BigEndian.PutUint32(hdr[8:], fileVersion)
	hdr[12] = byte(level)
	n := t.Size()
	binary.BigEndian.PutUint64(hdr[16:], n)
	copy(hdr[24:], t.root[:])
	if _, err := w.Write(hdr[:]); err != nil {
		return fmt.Errorf("sortedtree: writing tree: %w", err)
	}
	if _, err := w.Write(hashBytes(t.keys)); err != nil {
		return fmt.Errorf("sortedtree: writing tree: %w", err)
	}
	if n > 0 && height(n) >= level {
		for l := level; l <= height(n); l++ {
			if err := t.writeLevel(w, l); err != nil {
				return fmt.Errorf("sortedtree: writing tree: %w", err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("sortedtree: writing tree: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("sortedtree: writing tree: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sortedtree: writing tree: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sortedtree: writing tree: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("sortedtree: writing tree: %w", err)
	}
	return nil
}

// writeLevel writes level l, straight from memory if the tree stores it.
func (t *Tree) writeLevel(w io.Writer, l int) error {
	if i := l - t.low; i >= 0 && i < len(t.levels) {
		_, err := w.Write(hashBytes(t.levels[i]))
		return err
	}
	var buf [HashSize * 256]byte
	m := width(t.Size(), l)
	for j := uint64(0); j < m; {
		b := buf[:0]
		for ; j < m && len(b) < len(buf); j++ {
			h := t.node(l, j)
			b = append(b, h[:]...)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// hashBytes views hashes as one byte slice without copying.
func hashBytes(h [][32]byte) []byte {
	if len(h) == 0 {
		return nil
	}
	return unsafe.Slice(&h[0][0], len(h)*HashSize)
}

// bytesHashes views b, a multiple of 32 bytes long, as hashes.
func bytesHashes(b []byte) [][32]byte {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*[32]byte)(unsafe.Pointer(&b[0])), len(b)/HashSize)
}

// Open memory-maps a tree file read-only: the keys and stored levels are
// used in place, not read into the heap, and the operating system pages them
// in as proofs touch them. Open returns at once; levels between CacheLevel
// and the file's stored level are recomputed into memory in the background
// (about 16 bytes per key with the default file level; see Ready). Open
// checks the header, the file's length and the stored root; Check re-hashes
// everything. Close the tree to unmap the file; it must not be used
// afterwards.
func Open(path string) (*Tree, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sortedtree: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("sortedtree: %w", err)
	}
	var hdr [fileHeader]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: %s: header: %v", ErrFormat, path, err)
	}
	if string(hdr[:8]) != fileMagic {
		return nil, fmt.Errorf("%w: %s is not a pkie sorted tree (magic %q)", ErrFormat, path, hdr[:8])
	}
	if v := binary.BigEndian.Uint32(hdr[8:]); v != fileVersion {
		return nil, fmt.Errorf("%w: %s: unsupported version %d (want %d)", ErrFormat, path, v, fileVersion)
	}
	level := int(hdr[12])
	n := binary.BigEndian.Uint64(hdr[16:])
	if level > maxFileLevel || hdr[13]|hdr[14]|hdr[15] != 0 || binary.BigEndian.Uint64(hdr[56:]) != 0 {
		return nil, fmt.Errorf("%w: %s: bad header fields", ErrFormat, path)
	}
	var root [32]byte
	copy(root[:], hdr[24:])
	// Expected length, with overflow checks: n comes from the file.
	if n > (1<<62)/HashSize {
		return nil, fmt.Errorf("%w: %s: implausible key count %d", ErrFormat, path, n)
	}
	want := uint64(fileHeader) + n*HashSize
	if n > 0 && height(n) >= level {
		for l := level; l <= height(n); l++ {
			want += width(n, l) * HashSize
		}
	}
	if uint64(fi.Size()) != want {
		return nil, fmt.Errorf("%w: %s is %d bytes, want %d for %d keys", ErrFormat, path, fi.Size(), want, n)
	}
	t := &Tree{low: level}
	if n > 0 {
		mm, err := syscall.Mmap(int(f.Fd()), 0, int(want), syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("sortedtree: mapping %s: %w", path, err)
		}
		t.mm = mm
		off := uint64(fileHeader)
		t.keys = bytesHashes(mm[off : off+n*HashSize])
		off += n * HashSize
		if height(n) >= level {
			for l := level; l <= height(n); l++ {
				w := width(n, l) * HashSize
				t.levels = append(t.levels, bytesHashes(mm[off:off+w]))
				off += w
			}
		}
	}
	if level > CacheLevel && n > 0 && height(n) >= CacheLevel {
		t.cache = newCache(t, level)
	}
	t.index = newIndex(t.keys, true, t.dropKeys)
	t.ready = make(chan struct{})
	var levels []byte
	if n > 0 && height(n) >= level {
		levels = t.mm[fileHeader+n*HashSize:]
	}
	if len(levels) > 0 {
		// Map the stored levels into this process now (1/64 of the
		// keys' size): otherwise nearly every proof takes a page fault
		// at each of its lowest stored levels, which at 100 million
		// keys cost more than hashing the whole audit path. Close
		// stops it and waits, as for the index.
		ix := t.index
		ix.wg.Add(1)
		go func() {
			defer ix.wg.Done()
			ix.touched = prefault(levels, &ix.stop)
		}()
	}
	go func(c *cache, ix *prefixIndex, ready chan struct{}) {
		if c != nil {
			<-c.done
		}
		ix.wg.Wait()
		close(ready)
	}(t.cache, t.index, t.ready)
	if got := t.computeRoot(); got != root {
		t.Close()
		return nil, fmt.Errorf("%w: %s: root in header does not match the stored tree", ErrFormat, path)
	}
	t.root = root
	return t, nil
}

// dropKeys advises the kernel that this process will not need the pages
// of keys [lo, hi) soon (MADV_DONTNEED on the read-only shared mapping:
// they stay in the page cache and page back in on the next read).
func (t *Tree) dropKeys(lo, hi uint64) {
	if t.mm != nil {
		dropPages(t.mm, int(fileHeader+lo*HashSize), int(fileHeader+hi*HashSize), 0, 0)
	}
}

// prefault reads one byte of every page of b, so that the kernel maps
// them all, checking stop every 4 MiB. It returns the bytes' sum, for the
// caller to keep, so that the reads are not optimized away.
func prefault(b []byte, stop *atomic.Bool) (sum byte) {
	page := os.Getpagesize()
	for i := 0; i < len(b); i += page {
		if i%(4<<20) == 0 && stop.Load() {
			return sum
		}
		sum += b[i]
	}
	return sum
}

// Close unmaps the file behind a tree from Open. It is a no-op for a tree
// from Build.
func (t *Tree) Close() error {
	if t.cache != nil {
		t.cache.close()
	}
	t.index.close()
	mm := t.mm
	t.mm, t.keys, t.levels = nil, nil, nil
	if mm == nil {
		return nil
	}
	return syscall.Munmap(mm)
}
