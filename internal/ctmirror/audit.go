package ctmirror

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/transparency-dev/tessera/api/layout"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/sortedtree"
)

// AuditConfig says which mirror to audit against which log.
type AuditConfig struct {
	// MirrorURL is where the mirror's Handler is mounted (MirrorURL/head,
	// MirrorURL/tree).
	MirrorURL string
	// MirrorKey is the mirror's verifier key (its PubKeyFile).
	MirrorKey string
	// LogKind is ctfollow.KindStatic (the default) or KindRFC6962.
	LogKind string
	// LogURL is the log's static-ct-api monitoring prefix or RFC 6962 URL.
	LogURL string
	// LogKey is the log's RFC 6962 note verifier key
	// ("<origin>+<hash>+<base64>", checkpoint.NewLogVerifier).
	LogKey string
	// Dir is scratch space (the fresh follower's keys file, the rebuilt
	// tree, the mirror's tree file); empty means a temporary directory,
	// removed afterwards.
	Dir string
	// HTTP is the client for the mirror and the log; nil means one with
	// a 5-minute timeout per request.
	HTTP *http.Client
	// Progress, if set, receives one line per step.
	Progress func(string)
}

// AuditResult is what an audit found.
type AuditResult struct {
	// Head is the mirror's head audited.
	Head *checkpoint.Head `json:"head"`
	// Keys and Root are the tree rebuilt from the log's entries up to the
	// head's checkpoint.
	Keys uint64 `json:"keys"`
	Root []byte `json:"root"`
	// Missing and Extra are keys (hex) the rebuilt tree holds and the
	// mirror's tree file lacks, and the reverse, at most 10 each, when
	// the trees differ and the mirror serves its tree file.
	Missing []string `json:"missing,omitempty"`
	Extra   []string `json:"extra,omitempty"`
	// OK is true when the mirror's head names exactly the rebuilt tree.
	OK bool `json:"ok"`
	// Took is how long the audit ran.
	Took time.Duration `json:"took"`
}

// ErrMismatch is the error of an audit that found the mirror's tree is not
// the tree of the log's entries.
var ErrMismatch = errors.New("ctmirror: the mirror's head does not name the tree of the log's entries")

// Audit checks a mirror against the log, trusting neither: it fetches the
// mirror's head and verifies it (mirror key, and the bound checkpoint with
// the log key, at any age: an audit judges correctness, not freshness),
// follows the log from scratch with a fresh follower up to exactly that
// checkpoint (every tile or entry checked against it), rebuilds the sorted
// tree of the keys with sortedtree.BuildFile, and compares size and root.
// A difference is an error wrapping ErrMismatch that names both; when the
// mirror serves its tree file, the result lists keys missing from it and
// keys it holds that the log does not give.
//
// A static-ct-api log is read at the head's checkpoint whatever its size
// now (its tiles cover every smaller tree). An RFC 6962 log serves only its
// newest STH, so the audit of an RFC 6962 mirror needs the log not to have
// grown since the head: otherwise it says so and fails.
func Audit(ctx context.Context, c AuditConfig) (*AuditResult, error) {
	start := time.Now()
	say := func(f string, a ...any) {
		if c.Progress != nil {
			c.Progress(fmt.Sprintf(f, a...))
		}
	}
	if c.MirrorURL == "" || c.MirrorKey == "" || c.LogURL == "" || c.LogKey == "" {
		return nil, errors.New("ctmirror: audit needs the mirror's URL and key and the log's URL and key")
	}
	if c.LogKind == "" {
		c.LogKind = ctfollow.KindStatic
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	mv, err := checkpoint.NewVerifier(c.MirrorKey)
	if err != nil {
		return nil, fmt.Errorf("ctmirror: mirror key: %w", err)
	}
	lv, err := checkpoint.NewLogVerifier(c.LogKey)
	if err != nil {
		return nil, fmt.Errorf("ctmirror: log key: %w", err)
	}
	mirror, err := newGetter(c.MirrorURL, hc)
	if err != nil {
		return nil, err
	}
	msg, err := mirror.get(ctx, "head", checkpoint.MaxSize)
	if err != nil {
		return nil, fmt.Errorf("ctmirror: the mirror's head: %w", err)
	}
	h, err := checkpoint.OpenMirrorHeadAnyAge(msg, mv, lv)
	if err != nil {
		return nil, fmt.Errorf("ctmirror: the mirror's head: %w", err)
	}
	say("mirror %s: head of %d keys, root %x, signed %s, bound to %s at %d entries", h.Origin, h.Size, h.Root, h.Time.UTC().Format(time.RFC3339), h.Log.Origin, h.Log.Size)

	dir := c.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pkie-audit-mirror-*"); err != nil {
			return nil, fmt.Errorf("ctmirror: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	fc := ctfollow.Config{Kind: c.LogKind, URL: c.LogURL, Key: c.LogKey, Dir: filepath.Join(dir, "follow"), HTTP: hc,
		Logger: slog.New(slog.DiscardHandler)}
	if c.LogKind == ctfollow.KindStatic {
		// The head's checkpoint, not the log's newest: the fresh follower
		// stops exactly there.
		lmsg, err := h.LogNote()
		if err != nil {
			return nil, err
		}
		lg, err := newGetter(c.LogURL, hc)
		if err != nil {
			return nil, err
		}
		fc.Fetch = lg.fetchers(lmsg)
	}
	if _, err := os.Stat(fc.Dir); err == nil {
		return nil, fmt.Errorf("ctmirror: %s exists: an audit follows the log from scratch", fc.Dir)
	}
	f, err := ctfollow.Open(ctx, fc)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	say("following %s from scratch to %d entries", h.Log.Origin, h.Log.Size)
	st, err := f.Sync(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("ctmirror: following the log: %w", err)
	}
	if st.Size != h.Log.Size || string(st.Root) != string(h.Log.Root[:]) {
		return nil, fmt.Errorf("ctmirror: the log is at %d entries, the head's checkpoint at %d: an RFC 6962 log serves only its newest tree head, so audit again when the mirror has caught up", st.Size, h.Log.Size)
	}
	say("verified %d entries, %d keys; rebuilding the sorted tree", st.Size, st.KeyCount)
	treePath := filepath.Join(dir, "rebuilt.tree")
	stats, err := sortedtree.BuildFile(ctx, treePath, f.KeysPath(), 0, st.KeyCount, sortedtree.BuildFileOptions{})
	if err != nil {
		return nil, fmt.Errorf("ctmirror: rebuilding the tree: %w", err)
	}
	res := &AuditResult{Head: h, Keys: stats.Keys, Root: stats.Root[:], OK: stats.Keys == h.Size && stats.Root == h.Root}
	if !res.OK {
		res.Missing, res.Extra = diffMirrorTree(ctx, mirror, dir, treePath, say)
	}
	res.Took = time.Since(start)
	if !res.OK {
		return res, fmt.Errorf("%w: the head of %s says %d keys with root %x; the log's first %d entries give %d keys with root %x",
			ErrMismatch, h.Origin, h.Size, h.Root, h.Log.Size, stats.Keys, stats.Root)
	}
	say("ok: the head names the tree of the log's entries")
	return res, nil
}

// diffMirrorTree fetches the mirror's tree file and lists the first keys
// in one tree and not the other; it gives up quietly (nil lists) if the
// file cannot be fetched or opened: the mismatch stands either way.
func diffMirrorTree(ctx context.Context, mirror *getter, dir, rebuilt string, say func(string, ...any)) (missing, extra []string) {
	path := filepath.Join(dir, "mirror.tree")
	if err := mirror.download(ctx, "tree", path); err != nil {
		say("cannot fetch the mirror's tree file: %v", err)
		return nil, nil
	}
	a, err := sortedtree.Open(rebuilt)
	if err != nil {
		return nil, nil
	}
	defer a.Close()
	b, err := sortedtree.Open(path)
	if err != nil {
		say("the mirror's tree file does not open: %v", err)
		return nil, nil
	}
	defer b.Close()
	const most = 10
	i, j := uint64(0), uint64(0)
	for (i < a.Size() || j < b.Size()) && (len(missing) < most || len(extra) < most) {
		switch {
		case j >= b.Size():
			missing = appendMost(missing, a.Key(i), most)
			i++
		case i >= a.Size():
			extra = appendMost(extra, b.Key(j), most)
			j++
		default:
			ka, kb := a.Key(i), b.Key(j)
			switch c := strings.Compare(string(ka[:]), string(kb[:])); {
			case c == 0:
				i++
				j++
			case c < 0:
				missing = appendMost(missing, ka, most)
				i++
			default:
				extra = appendMost(extra, kb, most)
				j++
			}
		}
	}
	return missing, extra
}

func appendMost(l []string, k [32]byte, most int) []string {
	if len(l) >= most {
		return l
	}
	return append(l, hex.EncodeToString(k[:]))
}

// getter reads a static-ct-api log's or a mirror's files over HTTP, each
// bounded in size.
type getter struct {
	base *url.URL
	hc   *http.Client
}

func newGetter(base string, hc *http.Client) (*getter, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("ctmirror: URL %q is not http(s)", base)
	}
	return &getter{base: u, hc: hc}, nil
}

func (g *getter) open(ctx context.Context, rel string) (*http.Response, error) {
	u := g.base.JoinPath(rel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return resp, nil
	case http.StatusNotFound:
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %w", u, fs.ErrNotExist)
	default:
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", u, resp.Status)
	}
}

func (g *getter) get(ctx context.Context, rel string, max int64) ([]byte, error) {
	resp, err := g.open(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: more than %d bytes", rel, max)
	}
	return b, nil
}

// maxTreeDownload bounds a mirror's tree file an auditor fetches: a
// billion keys.
const maxTreeDownload = 33 << 30

func (g *getter) download(ctx context.Context, rel, path string) error {
	resp, err := g.open(ctx, rel)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, maxTreeDownload+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > maxTreeDownload {
		err = fmt.Errorf("%s: more than %d bytes", rel, int64(maxTreeDownload))
	}
	return err
}

// Bounds of what a static-ct-api log serves: a full hash tile is 8 KiB; a
// data tile of 256 entries with their chains' fingerprints is bounded at
// 64 MiB, as a follower bounds it; an issuer at 64 KiB.
const (
	maxHashTile = 256 * 32
	maxDataTile = 64 << 20
	maxIssuer   = 64 << 10
)

// fetchers reads a static-ct-api log's tiles over HTTP, with cp as its
// checkpoint (the head's, not the log's newest).
func (g *getter) fetchers(cp []byte) *ctfollow.Fetchers {
	partial := func(ctx context.Context, p uint8, rel func(uint8) string, max int64) ([]byte, error) {
		b, err := g.get(ctx, rel(p), max)
		if p != 0 && errors.Is(err, fs.ErrNotExist) {
			return g.get(ctx, rel(0), max)
		}
		return b, err
	}
	return &ctfollow.Fetchers{
		Checkpoint: func(context.Context) ([]byte, error) { return cp, nil },
		Tile: func(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
			return partial(ctx, p, func(p uint8) string { return layout.TilePath(level, index, p) }, maxHashTile)
		},
		EntryBundle: func(ctx context.Context, index uint64, p uint8) ([]byte, error) {
			return partial(ctx, p, func(p uint8) string { return "tile/data/" + layout.NWithSuffix(0, index, p) }, maxDataTile)
		},
		Issuer: func(ctx context.Context, fp [32]byte) ([]byte, error) {
			return g.get(ctx, "issuer/"+hex.EncodeToString(fp[:]), maxIssuer)
		},
	}
}
