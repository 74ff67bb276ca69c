package consensus

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cache is the client's local record of certificates it accepted: a
// (host, port, fingerprint) accepted at some time under one configuration
// (the notaries, their keys, the policy and the API: Configuration). It
// stores only what a trusted verdict accepted; a hit younger than the
// caller's maximum age answers without asking notaries. A different
// certificate for the same host is simply a miss, so a changed certificate
// always goes back to the notaries; so is the same certificate under
// another configuration, so removing a notary that lied also removes what
// it vouched for.
//
// It is one text file of lines appended in single writes (O_APPEND), read
// whole when the cache is opened: plain Go, so that a client links no
// database. Concurrent processes share it safely: each sees what the
// others stored before it opened the file, and what a process misses, or
// loses when another rewrites the file, is only a miss, which goes back to
// the notaries. A line that does not parse (a write cut short) is skipped,
// never read as an entry.
type Cache struct {
	path string

	mu     sync.Mutex
	f      *os.File // opened for appending
	bySHA1 map[cacheKey]*cacheEntry
	by256  map[cacheKey]*cacheEntry
}

// cacheKey names an entry: the certificate's SHA-1 or SHA-256 (fp), at a
// host and port, under a configuration.
type cacheKey struct {
	host   string
	port   int
	config string
	fp     string
}

type cacheEntry struct {
	sha1   [20]byte
	sha256 *[32]byte
	at     time.Time
}

// cacheHeader is the first line of a cache file: a file that starts
// otherwise (another format, or an SQLite cache of earlier versions) is
// refused, naming the file, rather than overwritten.
const cacheHeader = "pkie verdict cache v1\n"

// compactAfter is how many superseded lines a cache file may hold before
// OpenCache rewrites it with the newest line of each entry.
const compactAfter = 4096

// DefaultCachePath returns os.UserCacheDir()/pkie/verdicts.cache.
func DefaultCachePath() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache directory: %w", err)
	}
	return filepath.Join(d, "pkie", "verdicts.cache"), nil
}

// OpenCache opens (creating if needed) the cache at path. The directory is
// created 0700 and the file 0600: the cache reveals which sites its user
// visits.
func OpenCache(_ context.Context, path string) (*Cache, error) {
	if path == "" {
		return nil, errors.New("cache path is empty")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache file: %w", err)
	}
	c := &Cache{path: path, f: f, bySHA1: map[cacheKey]*cacheEntry{}, by256: map[cacheKey]*cacheEntry{}}
	lines, err := c.load()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cache %s: %w", path, err)
	}
	if lines-len(c.bySHA1) > compactAfter {
		if err := c.compact(); err != nil {
			f.Close()
			return nil, fmt.Errorf("cache %s: %w", path, err)
		}
	}
	return c, nil
}

// load reads the file, writing the header into an empty one, and returns
// how many entry lines it holds.
func (c *Cache) load() (int, error) {
	st, err := c.f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() == 0 {
		_, err := io.WriteString(c.f, cacheHeader)
		return 0, err
	}
	r := bufio.NewReader(c.f)
	first, err := r.ReadString('\n')
	if first != cacheHeader {
		if err != nil && err != io.EOF {
			return 0, err
		}
		return 0, errors.New("file is not a pkie cache (delete it or pass another --cache)")
	}
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return n, nil // a last line without its newline was cut short
		}
		if err != nil {
			return n, err
		}
		if k, e, ok := parseCacheLine(line); ok {
			c.put(k, e)
			n++
		}
	}
}

// A line is "accepted-unix-ns port sha1 sha256-or-dash config host\n".
func parseCacheLine(line []byte) (Key, time.Time, bool) {
	f := strings.Fields(string(bytes.TrimSuffix(line, []byte("\n"))))
	if len(f) != 6 {
		return Key{}, time.Time{}, false
	}
	ns, err1 := strconv.ParseInt(f[0], 10, 64)
	port, err2 := strconv.Atoi(f[1])
	s1, err3 := hex.DecodeString(f[2])
	if err1 != nil || err2 != nil || err3 != nil || len(s1) != 20 {
		return Key{}, time.Time{}, false
	}
	k := Key{Host: f[5], Port: port, Config: f[4]}
	copy(k.SHA1[:], s1)
	if f[3] != "-" {
		s256, err := hex.DecodeString(f[3])
		if err != nil || len(s256) != 32 {
			return Key{}, time.Time{}, false
		}
		k.SHA256 = (*[32]byte)(s256)
	}
	return k, time.Unix(0, ns), true
}

func cacheLine(k Key, e *cacheEntry) string {
	s256 := "-"
	if e.sha256 != nil {
		s256 = hex.EncodeToString(e.sha256[:])
	}
	return fmt.Sprintf("%d %d %x %s %s %s\n", e.at.UnixNano(), k.Port, e.sha1[:], s256, k.Config, k.host())
}

// put records k accepted at t in memory, as a re-store does: the time
// moves, a SHA-256 learnt is kept.
func (c *Cache) put(k Key, t time.Time) *cacheEntry {
	k1 := cacheKey{k.host(), k.Port, k.Config, string(k.SHA1[:])}
	e := c.bySHA1[k1]
	if e == nil {
		e = &cacheEntry{sha1: k.SHA1}
		c.bySHA1[k1] = e
	}
	e.at = t
	if k.SHA256 != nil {
		if e.sha256 != nil && *e.sha256 != *k.SHA256 {
			delete(c.by256, cacheKey{k.host(), k.Port, k.Config, string(e.sha256[:])})
		}
		s := *k.SHA256
		e.sha256 = &s
		c.by256[cacheKey{k.host(), k.Port, k.Config, string(s[:])}] = e
	}
	return e
}

// compact rewrites the file with the newest line of each entry, through a
// temporary file renamed over it.
func (c *Cache) compact() error {
	var b strings.Builder
	b.WriteString(cacheHeader)
	keys := make([]cacheKey, 0, len(c.bySHA1))
	for k := range c.bySHA1 {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b cacheKey) int { return strings.Compare(a.host+a.fp+a.config, b.host+b.fp+b.config) })
	for _, k := range keys {
		b.WriteString(cacheLine(Key{Host: k.host, Port: k.port, Config: k.config}, c.bySHA1[k]))
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".cache-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		return err
	}
	f, err := os.OpenFile(c.path, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	c.f.Close()
	c.f = f
	return nil
}

// Close closes the file.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.f.Close()
}

// Key names a certificate at a target under one configuration. SHA256 may
// be nil when the caller knows only the SHA-1 (Convergence's
// converge(host, port, sha1)); lookups use the SHA-256 when it is known.
type Key struct {
	Host   string
	Port   int
	SHA1   [20]byte
	SHA256 *[32]byte
	// Config is the Configuration.Key of the configuration that accepted
	// the certificate: an entry answers only under the same one.
	Config string
}

func (k Key) host() string { return strings.ToLower(k.Host) }

// Accepted is a cached acceptance.
type Accepted struct {
	At time.Time
}

// Lookup returns when k was accepted, and whether it is in the cache at
// all.
func (c *Cache) Lookup(_ context.Context, k Key) (Accepted, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var e *cacheEntry
	if k.SHA256 != nil {
		e = c.by256[cacheKey{k.host(), k.Port, k.Config, string(k.SHA256[:])}]
	} else {
		e = c.bySHA1[cacheKey{k.host(), k.Port, k.Config, string(k.SHA1[:])}]
	}
	if e == nil {
		return Accepted{}, false, nil
	}
	return Accepted{At: e.at}, true, nil
}

// Store records that k was accepted at t.
func (c *Cache) Store(_ context.Context, k Key, t time.Time) error {
	if k.Config == "" {
		return errors.New("cache store: key has no configuration")
	}
	if strings.ContainsFunc(k.host()+k.Config, func(r rune) bool { return r <= ' ' || r == 0x7f }) || k.host() == "" {
		return fmt.Errorf("cache store: host %q or configuration %q is empty or holds a space or control character", k.Host, k.Config)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.put(k, t)
	if _, err := io.WriteString(c.f, cacheLine(k, e)); err != nil {
		return fmt.Errorf("cache store: %w", err)
	}
	return nil
}

// Configuration is what decides whether the notaries accept a certificate,
// and so what a cached acceptance stands for: the notaries (by the keys
// their bundles pin, which is what makes an answer theirs), the policy
// with its settings, the wire API and the maximum age of a v1 answer.
// What the Checker does beside the notaries (the sources: CA validation
// with its roots, ct, revocation, and which of them are required) is not
// part of it, because a cache hit never skips them.
type Configuration struct {
	Notaries     []*Bundle
	Policy       Policy
	API          API
	AnswerMaxAge time.Duration
}

// Key returns a digest of c that is the same for every equal configuration,
// however its notaries are ordered or their replicas listed, and differs
// when a notary is added, removed or re-keyed, or any setting changes.
func (c Configuration) Key() string {
	notaries := make([]string, len(c.Notaries))
	for i, b := range c.Notaries {
		hosts := make([]string, len(b.Hosts))
		for j := range b.Hosts {
			h := &b.Hosts[j]
			var der []byte
			if h.cert != nil {
				der = h.cert.Raw
			}
			sum := sha256.Sum256(der)
			hosts[j] = hex.EncodeToString(sum[:]) + "/" + hex.EncodeToString(h.v1)
		}
		// Replicas share the notary's keys: how many a bundle lists, and
		// where, does not change its vote.
		slices.Sort(hosts)
		notaries[i] = strings.Join(slices.Compact(hosts), ",")
	}
	// A notary listed twice votes twice: sorted, not deduplicated.
	slices.Sort(notaries)
	h := sha256.New()
	fmt.Fprintf(h, "pkie cache configuration 1\npolicy %s\nmin-duration %d\nunreachable-is-failure %t\napi %s\nanswer-max-age %d\n",
		c.Policy.String(), c.Policy.MinDuration, c.Policy.UnreachableIsFailure, c.API, c.AnswerMaxAge)
	for _, n := range notaries {
		fmt.Fprintf(h, "notary %s\n", n)
	}
	return hex.EncodeToString(h.Sum(nil))
}
