package oldctlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// TempLockFile is the lock a sorted-tree build holds (shared) while its
// temporary files exist, and the stale-file sweep takes (exclusive, without
// waiting), so that a sweep in one process never removes the file another
// process is still writing. It is never removed: removing a lock file
// races with a process opening it.
const TempLockFile = "sorted.tree.lock"

// sortedTempName returns a fresh name for a tree being written in dir. A
// build writes it (through sortedtree's own temporary file, see
// sortedTempNames), then renames it to SortedTreeFile.
func sortedTempName(dir string) string {
	return filepath.Join(dir, fmt.Sprintf("%s.tmp-%x", SortedTreeFile, randBytes(6)))
}

// sortedTempNames match exactly the temporary files a build writes: the
// tree's (sorted.tree.tmp-<12 hex>, from sortedTempName) and the one
// sortedtree.WriteFile writes it through (.sorted.tree.tmp-<12
// hex>.tmp<digits>, os.CreateTemp's random part). Nothing else in the
// directory is touched.
var sortedTempNames = []*regexp.Regexp{
	regexp.MustCompile(`^` + regexp.QuoteMeta(SortedTreeFile) + `\.tmp-[0-9a-f]{12}$`),
	regexp.MustCompile(`^\.` + regexp.QuoteMeta(SortedTreeFile) + `\.tmp-[0-9a-f]{12}\.tmp[0-9]+$`),
}

// isSortedTemp reports whether name is one of a build's temporary files.
func isSortedTemp(name string) bool {
	for _, re := range sortedTempNames {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// lockTemps takes TempLockFile in dir: shared for a build (builds in
// several processes may run at once), exclusive for a sweep. A sweep does
// not wait: ok is false when a build holds the lock.
func lockTemps(dir string, exclusive bool) (release func(), ok bool, err error) {
	f, err := os.OpenFile(filepath.Join(dir, TempLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("ctlog: opening the build lock: %w", err)
	}
	ok, err = flock(f, exclusive)
	if err != nil || !ok {
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("ctlog: taking the build lock %s: %w", f.Name(), err)
		}
		return nil, false, nil
	}
	return func() { f.Close() }, true, nil // closing releases the lock
}

// removeStaleTemps removes the temporary files that builds killed half way
// (kill -9, a power cut) left in the directory, each as big as the tree,
// telling logf about each, and returns how many it removed. While a build
// in this or another process holds the lock it removes nothing: that
// build's file is not stale, and the next open sweeps.
func (l *Log) removeStaleTemps(logf func(string, ...any)) (int, error) {
	release, ok, err := lockTemps(l.dir, true)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, nil
	}
	defer release()
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return 0, fmt.Errorf("ctlog: %w", err)
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() || !isSortedTemp(e.Name()) {
			continue
		}
		path := filepath.Join(l.dir, e.Name())
		var size int64
		if fi, err := e.Info(); err == nil {
			size = fi.Size()
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("ctlog: removing a stale temporary file: %w", err)
		}
		n++
		if logf != nil {
			logf("ctlog: removed %s (%d bytes), left by a sorted-tree build that did not finish", path, size)
		}
	}
	return n, nil
}
