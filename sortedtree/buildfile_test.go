package sortedtree

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// keysFile writes keys to a file of 32-byte keys and returns its path.
func keysFile(t testing.TB, keys [][32]byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, hashBytes(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// someKeys returns n pseudo-random keys from seed, with every tenth one a
// repeat of an earlier key.
func someKeys(seed string, n int) [][32]byte {
	out := make([][32]byte, n)
	for i := range out {
		if i%10 == 9 {
			out[i] = out[i/2]
			continue
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i))
		out[i] = sha256.Sum256(append([]byte(seed), b[:]...))
	}
	return out
}

// TestBuildFileEqualsBuild: the file BuildFile writes from a keys file is
// byte for byte the file Build and WriteFile write for the same keys, at
// sizes on both sides of the stored level and of the parallel hashing
// threshold, and it opens to the same root.
func TestBuildFileEqualsBuild(t *testing.T) {
	for _, n := range []int{0, 1, 2, 64, 65, 129, 1000, 70000, 600000} {
		keys := someKeys("a", n)
		src := keysFile(t, keys)
		dir := t.TempDir()
		got := filepath.Join(dir, "built.tree")
		st, err := BuildFile(context.Background(), got, src, 0, uint64(n), BuildFileOptions{})
		if err != nil {
			t.Fatalf("%d keys: %v", n, err)
		}
		want := filepath.Join(dir, "want.tree")
		ref := Build(append([][32]byte(nil), keys...))
		if err := ref.WriteFile(want); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(got)
		b, _ := os.ReadFile(want)
		if !bytes.Equal(a, b) {
			t.Fatalf("%d keys: BuildFile wrote %d bytes, WriteFile %d, and they differ", n, len(a), len(b))
		}
		if st.Keys != ref.Size() || st.Root != ref.Root() || st.Added != uint64(n) {
			t.Fatalf("%d keys: stats %+v, want %d keys root %x", n, st, ref.Size(), ref.Root())
		}
		tr, err := Open(got)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Root() != ref.Root() {
			t.Fatalf("%d keys: opened root differs", n)
		}
		tr.Close()
	}
}

// TestBuildFileMerge: a build on a base tree holds the union, equal to a
// build of all the keys at once, whether the new keys overlap the base's
// or not; only the keys from first on are read.
func TestBuildFileMerge(t *testing.T) {
	// Release merged pages every 1,000 keys, so that the merges below
	// drop pages of both files many times while they run.
	defer func(n int) { releaseEvery = n }(releaseEvery)
	releaseEvery = 1000
	for _, tc := range []struct{ old, add int }{{0, 5}, {5, 0}, {1000, 1}, {1000, 3000}, {200000, 5000}} {
		all := someKeys("m", tc.old+tc.add)
		// Overlap: some new keys repeat old ones.
		for i := tc.old; i < len(all) && i < tc.old+tc.add; i += 7 {
			if tc.old > 0 {
				all[i] = all[i%tc.old]
			}
		}
		src := keysFile(t, all)
		dir := t.TempDir()
		basePath := filepath.Join(dir, "base.tree")
		if _, err := BuildFile(context.Background(), basePath, src, 0, uint64(tc.old), BuildFileOptions{}); err != nil {
			t.Fatal(err)
		}
		base, err := Open(basePath)
		if err != nil {
			t.Fatal(err)
		}
		got := filepath.Join(dir, "merged.tree")
		st, err := BuildFile(context.Background(), got, src, uint64(tc.old), uint64(tc.add), BuildFileOptions{Base: base})
		base.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(dir, "want.tree")
		ref := Build(append([][32]byte(nil), all...))
		if err := ref.WriteFile(want); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(got)
		b, _ := os.ReadFile(want)
		if !bytes.Equal(a, b) || st.Root != ref.Root() {
			t.Fatalf("%+v: merged file differs from a build of all keys (%d keys, want %d)", tc, st.Keys, ref.Size())
		}
	}
}

// TestBuildFileReleasing: with pages released every 100 keys, every pass
// of BuildFile drops pages while other goroutines still sort or hash next
// to them, and Open's fill drops the keys behind it: the file is still
// byte for byte WriteFile's (keys with many duplicates and a skewed first
// byte, so that the first pass moves keys far and compaction shifts), and
// the opened tree proves every key once ready.
func TestBuildFileReleasing(t *testing.T) {
	defer func(n int) { releaseEvery = n }(releaseEvery)
	releaseEvery = 100
	for _, n := range []int{70000, 300000} {
		keys := someKeys("r", n)
		for i := range keys {
			if i%5 == 0 {
				keys[i] = keys[i/2]
			}
			if i%3 == 0 {
				keys[i][0] = 0x42
			}
		}
		src := keysFile(t, keys)
		dir := t.TempDir()
		got := filepath.Join(dir, "built.tree")
		if _, err := BuildFile(context.Background(), got, src, 0, uint64(n), BuildFileOptions{}); err != nil {
			t.Fatal(err)
		}
		ref := Build(append([][32]byte(nil), keys...))
		want := filepath.Join(dir, "want.tree")
		if err := ref.WriteFile(want); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(got)
		b, _ := os.ReadFile(want)
		if !bytes.Equal(a, b) {
			t.Fatalf("%d keys: BuildFile releasing pages wrote a file that differs from WriteFile's", n)
		}
		tr, err := Open(got)
		if err != nil {
			t.Fatal(err)
		}
		<-tr.Ready()
		for i := 0; i < n; i += 997 {
			p, err := tr.Prove(keys[i])
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := p.Verify(keys[i], ref.Size(), ref.Root()); err != nil || !ok {
				t.Fatalf("%d keys: key %d: proof after a releasing fill: %v %v", n, i, ok, err)
			}
		}
		tr.Close()
	}
}

// TestBuildFileRefuses: a keys file shorter than asked, or a cancelled
// context, leaves no file behind.
func TestBuildFileRefuses(t *testing.T) {
	src := keysFile(t, someKeys("r", 10))
	dir := t.TempDir()
	out := filepath.Join(dir, "t.tree")
	if _, err := BuildFile(context.Background(), out, src, 5, 6, BuildFileOptions{}); err == nil {
		t.Fatal("built from a keys file shorter than asked")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := BuildFile(ctx, out, src, 0, 10, BuildFileOptions{}); err == nil {
		t.Fatal("built under a cancelled context")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left %d files behind", len(ents))
	}
}

// BenchmarkBuildFile100k measures BuildFile's rate on 100,000 keys from a
// keys file (the 100M-key run is pkie bench ct's).
func BenchmarkBuildFile100k(b *testing.B) {
	keys := someKeys("b", 100000)
	src := keysFile(b, keys)
	out := filepath.Join(b.TempDir(), "t.tree")
	b.SetBytes(int64(len(keys)) * HashSize)
	for b.Loop() {
		if _, err := BuildFile(context.Background(), out, src, 0, uint64(len(keys)), BuildFileOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBuildFileScale builds a tree of $PKIE_BUILDFILE_KEYS keys (SHA-256
// of their index) from a keys file in $PKIE_BUILDFILE_DIR and logs the
// time of each stage; skipped unless both are set. Run it under
// /usr/bin/time -v for the peak resident set (docs/formats/ct-mirror.md).
func TestBuildFileScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PKIE_BUILDFILE_KEYS"))
	dir := os.Getenv("PKIE_BUILDFILE_DIR")
	if n <= 0 || dir == "" {
		t.Skip("set PKIE_BUILDFILE_KEYS and PKIE_BUILDFILE_DIR")
	}
	src := filepath.Join(dir, "keys")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 1<<20)
	var b [8]byte
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(b[:], uint64(i))
		h := sha256.Sum256(b[:])
		buf = append(buf, h[:]...)
		if len(buf) == cap(buf) {
			f.Write(buf)
			buf = buf[:0]
		}
	}
	f.Write(buf)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := BuildFile(context.Background(), filepath.Join(dir, "scale.tree"), src, 0, uint64(n), BuildFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys in %v: %+v", st.Keys, st.Duration, st.Stages)
	t.Logf("after the build: %s", memStatus())
	tr, err := Open(filepath.Join(dir, "scale.tree"))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	<-tr.Ready()
	t.Logf("after Open and its fill: %s", memStatus())
}

// memStatus returns this process's peak and current resident set from
// /proc/self/status (VmHWM, VmRSS), or the error reading it.
func memStatus() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") || strings.HasPrefix(line, "VmRSS:") || strings.HasPrefix(line, "RssFile:") || strings.HasPrefix(line, "RssAnon:") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(out, ", ")
}
