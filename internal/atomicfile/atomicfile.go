// Package atomicfile writes key and state files so that a crash or a power
// cut leaves a whole file or none: never half a key, never a key that is in
// the page cache but not on the disk, never a rename the directory forgot.
//
// WriteFile replaces a file (state, a public key, a cache); CreateExclusive
// makes one that must not exist yet (a key made by init, where two inits
// racing on one directory must not both win).
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// WriteFile replaces path with data, mode perm. data goes to a temporary
// file in path's directory (named as TempPattern matches), whose mode is
// set to perm before a byte is written, so a secret is never readable by
// others even for a moment; the file is synced, renamed over path and the
// directory synced, so that after a crash path holds the old contents or
// the new, and after WriteFile returns the new ones survive one. On error
// the temporary file is removed and path is untouched.
//
// perm is the file's exact mode: the umask does not apply.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write is WriteFile with the contents written by write, which may stream
// them; an error from write leaves path untouched.
func Write(path string, perm fs.FileMode, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	err = f.Chmod(perm)
	if err == nil {
		err = write(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return syncDir(dir)
}

// CreateExclusive creates path with data and mode perm (less the umask),
// failing with an error that wraps fs.ErrExist when path exists: of two
// processes racing to create it, one wins and the other learns so. The
// mode is the file's from its creation, before any data; file and
// directory are synced before CreateExclusive returns. On an error after
// the file was created it is removed, so a failed attempt does not block
// the next.
func CreateExclusive(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err // *fs.PathError naming path; wraps fs.ErrExist when it exists
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes a rename or a creation in dir durable: until the directory
// itself is synced, a crash may forget the new name.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some file systems and platforms cannot sync a directory; the data
	// itself is synced, so that is no reason to fail the write.
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// TempPattern matches the names of the temporary files WriteFile and Write
// leave behind when the process dies between creating and renaming one:
// for "x.state", ".x.state.tmp-" and the decimal digits os.CreateTemp adds.
// A role sweeping its directory at start removes those.
func TempPattern(path string) *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(tempPrefix(path)) + "[0-9]+$")
}
