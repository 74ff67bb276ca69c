package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/obc"
)

// Bounds of a cookie jar file: what a few sites' sessions need, far below
// what could make reading it slow.
const (
	obcJarMaxBytes     = 1 << 20
	obcJarMaxOrigins   = 1024
	obcJarMaxPerOrigin = 64 // browsers keep at least 50 per domain (RFC 6265 §6.1)
)

// obcJarCookie is one cookie of a jar file.
type obcJarCookie struct {
	Name     string    `json:"name"`
	Value    string    `json:"value"`
	Path     string    `json:"path"`
	Expires  time.Time `json:"expires,omitzero"` // zero: until the jar is cleared
	HTTPOnly bool      `json:"http_only,omitempty"`
}

// obcJarFile is the jar file's format (docs/guides/obc.md).
type obcJarFile struct {
	Version int                       `json:"version"`
	Origins map[string][]obcJarCookie `json:"origins"`
}

// obcJar is the cookie jar of "pkie obc get --cookie-jar": cookies kept per
// origin (scheme, host, port), as origin-bound keys are in strict mode, so
// a cookie goes back only to the origin that set it, over a channel where
// the client presents that origin's key. A Domain attribute is ignored.
// It implements http.CookieJar.
type obcJar struct {
	path string
	now  func() time.Time

	mu      sync.Mutex
	origins map[string][]obcJarCookie
	changed bool
}

// openOBCJar reads the jar file at path; a missing file is an empty jar.
func openOBCJar(path string, now func() time.Time) (*obcJar, error) {
	j := &obcJar{path: path, now: now, origins: map[string][]obcJarCookie{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, obcJarMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cookie jar %s: %w", path, err)
	}
	if j.origins, err = parseOBCJar(b); err != nil {
		return nil, fmt.Errorf("cookie jar %s: %w (delete it to start afresh)", path, err)
	}
	return j, nil
}

// parseOBCJar parses a jar file's bytes, strictly and within the bounds.
func parseOBCJar(b []byte) (map[string][]obcJarCookie, error) {
	if len(b) > obcJarMaxBytes {
		return nil, fmt.Errorf("more than %d bytes", obcJarMaxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f obcJarFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a pkie cookie jar: %w", err)
	}
	if dec.More() {
		return nil, errors.New("data after the jar's JSON object")
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("version %d, want 1", f.Version)
	}
	if len(f.Origins) > obcJarMaxOrigins {
		return nil, fmt.Errorf("%d origins, at most %d", len(f.Origins), obcJarMaxOrigins)
	}
	out := make(map[string][]obcJarCookie, len(f.Origins))
	for origin, cs := range f.Origins {
		o, err := obc.ParseOrigin(origin)
		if err != nil || o.String() != origin {
			return nil, fmt.Errorf("%q is not an origin as the jar writes them (https://host:port)", command.ClipArg(origin))
		}
		if len(cs) > obcJarMaxPerOrigin {
			return nil, fmt.Errorf("%s has %d cookies, at most %d", origin, len(cs), obcJarMaxPerOrigin)
		}
		for _, c := range cs {
			hc := http.Cookie{Name: c.Name, Value: c.Value, Path: c.Path}
			if err := hc.Valid(); err != nil || !strings.HasPrefix(c.Path, "/") {
				return nil, fmt.Errorf("%s: cookie %q is not valid (name, value, or a path not starting with /)", origin, command.ClipArg(c.Name))
			}
		}
		out[origin] = cs
	}
	return out, nil
}

func jarOrigin(u *url.URL) (string, bool) {
	o, err := obc.OriginOf(u)
	if err != nil {
		return "", false
	}
	return o.String(), true
}

// SetCookies keeps cs, set by a response from u, under u's origin.
func (j *obcJar) SetCookies(u *url.URL, cs []*http.Cookie) {
	origin, ok := jarOrigin(u)
	if !ok {
		return
	}
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	kept := j.origins[origin]
	for _, c := range cs {
		path := c.Path
		if !strings.HasPrefix(path, "/") {
			path = defaultCookiePath(u.Path)
		}
		i := 0
		for i < len(kept) && (kept[i].Name != c.Name || kept[i].Path != path) {
			i++
		}
		if i < len(kept) {
			kept = append(kept[:i:i], kept[i+1:]...)
		}
		j.changed = true
		expires := c.Expires
		if c.MaxAge > 0 {
			expires = now.Add(time.Duration(c.MaxAge) * time.Second)
		}
		if c.MaxAge < 0 || (!expires.IsZero() && !expires.After(now)) {
			continue // deleted
		}
		if len(kept) >= obcJarMaxPerOrigin {
			kept = kept[1:]
		}
		kept = append(kept, obcJarCookie{Name: c.Name, Value: c.Value, Path: path, Expires: expires.UTC(), HTTPOnly: c.HttpOnly})
	}
	if len(kept) == 0 {
		delete(j.origins, origin)
	} else if _, known := j.origins[origin]; known || len(j.origins) < obcJarMaxOrigins {
		j.origins[origin] = kept
	}
}

// Cookies returns the unexpired cookies of u's origin whose path matches
// u's, longest path first (RFC 6265 §5.4).
func (j *obcJar) Cookies(u *url.URL) []*http.Cookie {
	origin, ok := jarOrigin(u)
	if !ok {
		return nil
	}
	now := j.now()
	path := u.Path
	if path == "" {
		path = "/"
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var match []obcJarCookie
	for _, c := range j.origins[origin] {
		if (c.Expires.IsZero() || c.Expires.After(now)) && cookiePathMatch(path, c.Path) {
			match = append(match, c)
		}
	}
	sort.SliceStable(match, func(a, b int) bool { return len(match[a].Path) > len(match[b].Path) })
	out := make([]*http.Cookie, len(match))
	for i, c := range match {
		out[i] = &http.Cookie{Name: c.Name, Value: c.Value}
	}
	return out
}

// save writes the jar back if it changed: 0600 (cookies are credentials),
// through a temporary file renamed over the old one.
func (j *obcJar) save() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.changed {
		return nil
	}
	b, err := json.MarshalIndent(obcJarFile{Version: 1, Origins: j.origins}, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(j.path), "."+filepath.Base(j.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("cookie jar: %w", err)
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("cookie jar: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cookie jar: %w", err)
	}
	if err := os.Rename(f.Name(), j.path); err != nil {
		return fmt.Errorf("cookie jar: %w", err)
	}
	j.changed = false
	return nil
}

// defaultCookiePath is RFC 6265 §5.1.4's default-path of a request path.
func defaultCookiePath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return "/"
	}
	i := strings.LastIndex(p, "/")
	if i == 0 {
		return "/"
	}
	return p[:i]
}

// cookiePathMatch is RFC 6265 §5.1.4's path-match.
func cookiePathMatch(reqPath, cookiePath string) bool {
	if reqPath == cookiePath {
		return true
	}
	if !strings.HasPrefix(reqPath, cookiePath) {
		return false
	}
	return strings.HasSuffix(cookiePath, "/") || reqPath[len(cookiePath)] == '/'
}
