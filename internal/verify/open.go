package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/option"
)

// Names lists every back end pkie knows, in the order it reports them.
var Names = []string{"go", "go-parallel", "openssl", "webpki"}

// HelperProgram is the file name of a helper back end's program.
func HelperProgram(name string) string { return "pkie-verify-" + name }

// Options say which back ends to open and where their helpers are.
type Options struct {
	// Names of the back ends; nil means all of Names.
	Names []string
	// Dirs are searched in order for helper programs, then $PATH.
	Dirs []string
	// Timeout bounds each exchange with a helper.
	Timeout time.Duration
}

// Validate reports the first problem with o as an *option.Error: an
// unknown back end, one named twice, a list that names none (rather than
// nil for all), or a negative Timeout.
func (o *Options) Validate() error {
	names := []string{"Names"}
	if o.Names != nil && len(o.Names) == 0 {
		return option.Errorf("verify", names, "Names names no back end (known: %s)", strings.Join(Names, ", "))
	}
	for i, n := range o.Names {
		if !slices.Contains(Names, n) {
			return option.Errorf("verify", names, "Names: unknown back end %q (known: %s)", n, strings.Join(Names, ", "))
		}
		if slices.Contains(o.Names[:i], n) {
			return option.Errorf("verify", names, "Names: %s named twice", n)
		}
	}
	if o.Timeout < 0 {
		return option.Errorf("verify", []string{"Timeout"}, "Timeout must not be negative")
	}
	return nil
}

// Missing is a back end that could not be opened, and why.
type Missing struct {
	Name string `json:"name"`
	Why  string `json:"why"`
	// Found is set when the helper program exists but did not start or
	// greet: a broken back end rather than one not built.
	Found bool `json:"found"`
}

// Open opens the back ends o names. One whose helper is not built or does
// not start is reported in missing, and the others are opened all the
// same; an unknown name is an error.
func Open(ctx context.Context, o Options) (backends []Backend, missing []Missing, err error) {
	names := o.Names
	if len(names) == 0 {
		names = Names
	}
	for _, n := range names {
		known := false
		for _, k := range Names {
			known = known || k == n
		}
		if !known {
			return nil, nil, fmt.Errorf("verify: unknown back end %q (known: %s)", n, strings.Join(Names, ", "))
		}
	}
	for _, n := range names {
		switch n {
		case "go":
			backends = append(backends, NewGo(false))
			continue
		case "go-parallel":
			backends = append(backends, NewGo(true))
			continue
		}
		path, ferr := FindHelper(n, o.Dirs)
		if ferr != nil {
			missing = append(missing, Missing{Name: n, Why: ferr.Error()})
			continue
		}
		h, serr := StartHelper(ctx, n, path, o.Timeout)
		if serr != nil {
			missing = append(missing, Missing{Name: n, Why: serr.Error(), Found: true})
			continue
		}
		backends = append(backends, h)
	}
	return backends, missing, nil
}

// FindHelper looks for back end name's helper program in dirs, then on
// $PATH.
func FindHelper(name string, dirs []string) (string, error) {
	prog := HelperProgram(name)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(prog); err == nil {
		return p, nil
	}
	where := "on $PATH"
	if len(dirs) > 0 {
		where = "in " + strings.Join(dirs, ", ") + " or on $PATH"
	}
	return "", fmt.Errorf("not built: no %s %s (run \"make verifiers\")", prog, where)
}

// DefaultDirs are where pkie looks for helpers without --verifier-dir:
// $PKIE_VERIFIER_DIR, then the directory of the running executable.
func DefaultDirs(getenv func(string) string) []string {
	var dirs []string
	if d := getenv("PKIE_VERIFIER_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	return dirs
}

// CloseAll closes every back end.
func CloseAll(bs []Backend) error {
	var errs []error
	for _, b := range bs {
		errs = append(errs, b.Close())
	}
	return errors.Join(errs...)
}
