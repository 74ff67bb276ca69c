package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("modes are POSIX")
	}
	defer setUmask(0o077)() // the mode must not depend on the umask
	for _, tc := range []struct {
		name     string
		existing []byte // nil: no file before
		data     []byte
		perm     fs.FileMode
	}{
		{"new key", nil, []byte("secret\n"), 0o600},
		{"new public file", nil, []byte("public\n"), 0o644},
		{"replace longer with shorter", []byte("a much longer old content\n"), []byte("new\n"), 0o600},
		{"replace keeps no old mode", []byte("old"), []byte("new"), 0o644},
		{"empty", []byte("old"), []byte{}, 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if tc.existing != nil {
				if err := os.WriteFile(path, tc.existing, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, tc.data, tc.perm); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(tc.data) {
				t.Errorf("content %q, want %q", got, tc.data)
			}
			fi, _ := os.Stat(path)
			if fi.Mode().Perm() != tc.perm {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.perm)
			}
			if names := entries(t, dir); len(names) != 1 {
				t.Errorf("directory holds %q, want only f", names)
			}
		})
	}
}

// A failing writer leaves the old file as it was and no temporary file.
func TestWriteErrorLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, 0o600, func(w io.Writer) error {
		w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want it to wrap the writer's", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("path holds %q after a failed write, want the old contents", got)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("directory holds %q, want only state", names)
	}
}

// A rename that cannot happen (the target is a non-empty directory) fails
// the write and leaves no temporary file.
func TestWriteFileRenameFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "busy")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("x"), 0o600); err == nil {
		t.Fatal("WriteFile over a non-empty directory succeeded")
	}
	if names := entries(t, dir); len(names) != 1 || names[0] != "busy" {
		t.Errorf("directory holds %q, want only busy", names)
	}
}

// The temporary name is one TempPattern matches, so a sweep finds what a
// killed writer left; the final name and other files are not matched.
func TestTempPattern(t *testing.T) {
	re := TempPattern("/d/x.state")
	for name, want := range map[string]bool{
		".x.state.tmp-123456": true,
		".x.state.tmp-":       false,
		"x.state":             false,
		".x.state.tmp-12a":    false,
		".y.state.tmp-1":      false,
	} {
		if re.MatchString(name) != want {
			t.Errorf("TempPattern matches %q: %v, want %v", name, !want, want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "x.state")
	var seen string
	Write(path, 0o600, func(io.Writer) error {
		seen = entries(t, dir)[0]
		return errors.New("stop")
	})
	if !TempPattern(path).MatchString(seen) {
		t.Errorf("temporary file %q does not match TempPattern", seen)
	}
}

func TestCreateExclusive(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	if err := CreateExclusive(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want 0600", fi.Mode().Perm())
		}
	}
	err := CreateExclusive(path, []byte("second"), 0o600)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create: err = %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "first" {
		t.Errorf("the loser overwrote the winner: %q", got)
	}
	if err := CreateExclusive(filepath.Join(dir, "missing", "k"), nil, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("create in a missing directory: err = %v, want fs.ErrNotExist", err)
	}
}

// Of several racing creators exactly one wins.
func TestCreateExclusiveRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k")
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- CreateExclusive(path, []byte{byte('a' + i)}, 0o600) }()
	}
	wins := 0
	for range n {
		if err := <-errs; err == nil {
			wins++
		} else if !errors.Is(err, fs.ErrExist) {
			t.Error(err)
		}
	}
	if wins != 1 {
		t.Errorf("%d creators won, want 1", wins)
	}
}
