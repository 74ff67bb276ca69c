package oldctlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/sortedtree"
)

// An independent auditor checks a log from the outside: it trusts nothing
// but the log's pinned verifier key and reads only the public HTTP API
// (docs/formats/api-proofs.md). What the log serves is evidence to be checked, so
// an answer that fails to parse or to verify fails a check; only an answer
// the auditor could not get at all (a connection error, a timeout, an HTTP
// error status) stops the audit with an error, since that says nothing
// about the log's honesty.

// Bounds on what a remote audit reads.
const (
	// MaxEntriesResponseBytes bounds one /v1/log/entries answer. The
	// auditor asks for fewer entries at a time if a page is larger.
	MaxEntriesResponseBytes = 64 << 20
	// maxProofResponseBytes bounds a proof answer: 64 base64 hashes of
	// 32 bytes are under 3 KiB.
	maxProofResponseBytes = 16 << 10
	// maxProofHashes is the most hashes an RFC 6962 proof in a tree of
	// fewer than 2^64 leaves needs.
	maxProofHashes = 64
	// DefaultMaxTreeBytes bounds the tree download unless
	// RemoteAuditOptions says otherwise; a tree of the signed size bounds
	// it too.
	DefaultMaxTreeBytes = 16 << 30
	// treeAttempts is how often the auditor fetches the sorted checkpoint
	// and tree again when the log republished between the two requests.
	treeAttempts = 3
)

// RemoteAuditOptions configure AuditRemote.
type RemoteAuditOptions struct {
	// URL is the log's base URL, e.g. "http://log.example.org:8091"; the
	// API paths (/v1/...) are appended to it.
	URL string
	// Verifier is the log's pinned note verifier key (from
	// checkpoint.NewVerifier), the only thing the auditor trusts. Its name
	// is the log's origin; the sorted-tree heads' origin and key name are
	// SortedOrigin of it, the same key (checkpoint.HeadVerifier).
	Verifier note.Verifier
	// State, if set, is a file holding the last log checkpoint this
	// auditor verified (a signed note). The audit checks that the log's
	// latest checkpoint is consistent with it and then replaces it
	// (atomically, mode 0600). A missing file is a first run.
	State string
	// HTTP is the client; nil means a fresh http.Client. Its Timeout, if
	// set, applies to every request including the tree download; the two
	// timeouts below bound requests in any case.
	HTTP *http.Client
	// RequestTimeout bounds each API request, an entries page included;
	// zero means 30s.
	RequestTimeout time.Duration
	// TreeTimeout bounds the tree download; zero means 30m.
	TreeTimeout time.Duration
	// MaxTreeBytes bounds the tree download; zero means
	// DefaultMaxTreeBytes.
	MaxTreeBytes int64
	// MaxEntriesBytes bounds one page of entries; zero means
	// MaxEntriesResponseBytes. Pages over it are asked for again in
	// halves; a single entry over it fails the audit.
	MaxEntriesBytes int64
	// TempDir receives the downloaded tree, removed when the audit ends;
	// empty means os.TempDir().
	TempDir string
	// Now is the audit's time; zero means time.Now(). Checkpoints of any
	// age pass: an audit checks history, not freshness.
	Now time.Time
	// Progress, if set, is called as the tree downloads (stage "tree",
	// bytes) and as the entries are read (stage "entries", entries).
	Progress func(stage string, done, total uint64)
}

// fetchError is a request that got no usable answer.
type fetchError struct{ err error }

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

func isFetchError(err error) bool {
	var fe *fetchError
	return errors.As(err, &fe)
}

var errTooLarge = errors.New("answer too large")

type remoteAuditor struct {
	o    RemoteAuditOptions
	base string
	hc   *http.Client
}

// AuditRemote audits the log at o.URL through its HTTP API alone:
//
//  1. the log checkpoint and the sorted-tree head verify with the pinned
//     key under the log's origins, and so does the log checkpoint the head
//     is bound to;
//  2. the published sorted tree file opens, holds as many keys as its
//     head says, strictly ascending, every stored hash recomputed, and its
//     root is the signed one;
//  3. the log's entries hash to the signed log root, its first entries to
//     the root of the log checkpoint the head is bound to, and the
//     certificates among those are exactly the tree's keys (SHA-256 of each
//     certificate) and, in order, the key feed provers sync from;
//  4. a head of the same tree (this one, or the one appended before builds
//     that found nothing changed) is an entry of the log, proved by an
//     inclusion proof under the log checkpoint;
//  5. with o.State, the log checkpoint is consistent with the one saved
//     by the previous run.
//
// A check whose input failed an earlier check is left out of the report.
// The error is non-nil only if the audit could not run (bad options, the
// log unreachable or answering with an HTTP error, a local file problem).
func AuditRemote(ctx context.Context, o RemoteAuditOptions) (*AuditReport, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ctlog: log URL %q is not an http(s) URL", o.URL)
	}
	if o.Verifier == nil {
		return nil, errors.New("ctlog: no pinned verifier key for the remote audit")
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.TreeTimeout <= 0 {
		o.TreeTimeout = 30 * time.Minute
	}
	if o.MaxTreeBytes <= 0 {
		o.MaxTreeBytes = DefaultMaxTreeBytes
	}
	if o.MaxEntriesBytes <= 0 {
		o.MaxEntriesBytes = MaxEntriesResponseBytes
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	a := &remoteAuditor{o: o, base: strings.TrimSuffix(o.URL, "/"), hc: o.HTTP}
	if a.hc == nil {
		a.hc = &http.Client{}
	}
	origin := o.Verifier.Name()
	rep := &AuditReport{}

	// The sorted head first, then the log checkpoint: the log appends a
	// head and signs the log checkpoint covering it in one transaction, so
	// a log checkpoint read later covers the entry and the log checkpoint
	// the head is bound to.
	ss, err := a.fetchSorted(ctx)
	if err != nil {
		return nil, err
	}
	defer ss.close()
	var lcp *checkpoint.Checkpoint
	lmsg, err := a.get(ctx, "/v1/log/checkpoint", feed.MaxCheckpointBytes, o.RequestTimeout)
	if err == nil {
		lcp, err = checkpoint.Open(lmsg, o.Verifier, origin, forever, forever, o.Now)
	} else if isFetchError(err) {
		return nil, err
	}
	if !rep.add("log checkpoint signed by the log", err) {
		return rep, nil
	}
	rep.LogSize = lcp.Size
	sortedOK := rep.add("sorted-tree head signed by the log, bound to a log checkpoint it signed", ss.cpErr)
	if sortedOK && ss.cp.Log.Size > lcp.Size {
		sortedOK = rep.add("the head's log checkpoint is within the log", fmt.Errorf("the head is bound to a log of %d entries, the log's checkpoint signs %d", ss.cp.Log.Size, lcp.Size))
	}

	var tree *sortedtree.Tree
	if sortedOK {
		scp := ss.cp
		rep.SortedSize, rep.SortedRoot = scp.Size, fmt.Sprintf("%x", scp.Root)
		if rep.add("sorted tree file downloads and opens", ss.treeErr) &&
			rep.add("tree size matches the head", sizeMatch(ss.tree.Size(), scp.Size)) &&
			rep.add("keys sorted without duplicates, every hash recomputed", ss.tree.Check()) &&
			rep.add("root matches the signed sorted-tree head", rootMatch(ss.tree.Root(), scp.Root)) {
			tree = ss.tree
		}
	}

	w := &logWalk{lcp: lcp}
	if sortedOK {
		w.head, w.v = ss.cp, o.Verifier
		w.feed = &feedCompare{src: &feed.Client{Base: a.base + "/v1/sorted", HTTP: a.requestClient()}, size: ss.cp.Size}
		if tree != nil {
			w.set = newSetCompare(tree)
		}
	}
	err = a.walk(ctx, w)
	if isFetchError(err) {
		return nil, err
	}
	if rep.add("log entries hash to the signed log root", err) {
		if sortedOK {
			rep.add("the head's log checkpoint is the log's first entries", w.boundErr)
		}
		if w.set != nil {
			rep.add("tree holds exactly the certificates of the head's log checkpoint", w.set.result(w))
		}
		if w.feed != nil {
			rep.add("key feed lists the logged certificates in log order", w.feed.result())
		}
		if sortedOK {
			err := a.checkSortedEntry(ctx, w)
			if isFetchError(err) {
				return nil, err
			}
			rep.add("sorted root appended to the log", err)
		}
	}

	if o.State != "" {
		const name = "log checkpoint consistent with the saved one"
		first, err := a.checkState(ctx, lmsg, lcp)
		var se *stateError
		if isFetchError(err) || errors.As(err, &se) {
			return nil, err
		}
		if first {
			rep.Checks = append(rep.Checks, AuditCheck{Name: name, OK: true,
				Detail: fmt.Sprintf("first run: no saved checkpoint to compare; saved this one (%d entries) for the next run", lcp.Size)})
		} else {
			rep.add(name, err)
		}
	}
	return rep, nil
}

func rootMatch(got, want [32]byte) error {
	if got != want {
		return fmt.Errorf("tree root %x, the head signs %x", got, want)
	}
	return nil
}

// requestClient is the auditor's client with RequestTimeout on every
// request, for package feed's client, which sets no deadline of its own.
func (a *remoteAuditor) requestClient() *http.Client {
	c := *a.hc
	if c.Timeout == 0 || c.Timeout > a.o.RequestTimeout {
		c.Timeout = a.o.RequestTimeout
	}
	return &c
}

// open sends a GET for path. The caller closes the body.
func (a *remoteAuditor) open(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return nil, &fetchError{fmt.Errorf("ctlog: %w", err)}
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, &fetchError{fmt.Errorf("ctlog: GET %s: %w", path, err)}
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, &fetchError{fmt.Errorf("ctlog: GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))}
	}
	return resp, nil
}

// get reads the answer to a GET of path, at most limit bytes, within
// timeout.
func (a *remoteAuditor) get(ctx context.Context, path string, limit int64, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := a.open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("GET %s: %w: %d bytes, at most %d read", path, errTooLarge, resp.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &fetchError{fmt.Errorf("ctlog: GET %s: reading the answer: %w", path, err)}
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("GET %s: %w: more than %d bytes", path, errTooLarge, limit)
	}
	return body, nil
}

// sortedSnapshot is a verified sorted-tree head and the tree downloaded
// with it.
type sortedSnapshot struct {
	msg     []byte
	cp      *checkpoint.Head
	cpErr   error
	tree    *sortedtree.Tree
	treeErr error
	path    string
}

func (s *sortedSnapshot) close() {
	if s.tree != nil {
		s.tree.Close()
		s.tree = nil
	}
	if s.path != "" {
		os.Remove(s.path)
		s.path = ""
	}
}

// fetchSorted reads the sorted-tree head, downloads the tree and reads the
// head again. The log writes the tree file just before it commits the head
// naming it, so a build between the requests shows as a changed head or a
// tree of another root; then it tries again.
func (a *remoteAuditor) fetchSorted(ctx context.Context) (*sortedSnapshot, error) {
	for attempt := 1; ; attempt++ {
		s := &sortedSnapshot{}
		var err error
		s.msg, err = a.get(ctx, "/v1/sorted/checkpoint", feed.MaxCheckpointBytes, a.o.RequestTimeout)
		if err == nil {
			s.cp, err = checkpoint.OpenHeadAnyAge(s.msg, a.o.Verifier)
		} else if isFetchError(err) {
			return nil, err
		}
		if err != nil {
			s.cpErr = err
			return s, nil
		}
		s.path, s.treeErr = a.download(ctx, s.cp.Size)
		if isFetchError(s.treeErr) {
			return nil, s.treeErr
		}
		if s.treeErr == nil {
			s.tree, s.treeErr = sortedtree.Open(s.path)
		}
		again, err := a.get(ctx, "/v1/sorted/checkpoint", feed.MaxCheckpointBytes, a.o.RequestTimeout)
		if isFetchError(err) {
			s.close()
			return nil, err
		}
		settled := bytes.Equal(again, s.msg) && s.treeErr == nil && s.tree.Root() == s.cp.Root
		if settled || attempt == treeAttempts {
			return s, nil
		}
		s.close()
	}
}

// maxTreeFileBytes bounds the file of a sorted tree of n keys: a 64-byte
// header, the keys, and stored levels that together hold fewer than 2n+65
// hashes whatever level the file starts at.
func maxTreeFileBytes(n uint64, limit int64) int64 {
	if n >= uint64(limit)/(3*sortedtree.HashSize) {
		return limit
	}
	return min(limit, int64(64+sortedtree.HashSize*(3*n+65)))
}

// download fetches the published tree file for a tree of n keys into a
// temporary file and returns its path.
func (a *remoteAuditor) download(ctx context.Context, n uint64) (path string, err error) {
	ctx, cancel := context.WithTimeout(ctx, a.o.TreeTimeout)
	defer cancel()
	limit := maxTreeFileBytes(n, a.o.MaxTreeBytes)
	resp, err := a.open(ctx, "/v1/sorted/tree")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.ContentLength > limit {
		return "", fmt.Errorf("tree file of %d bytes, more than the %d a tree of %d keys can need", resp.ContentLength, limit, n)
	}
	f, err := os.CreateTemp(a.o.TempDir, "pkie-audit-*.tree")
	if err != nil {
		return "", &fetchError{fmt.Errorf("ctlog: temporary file for the tree: %w", err)}
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	var dst io.Writer = f
	if a.o.Progress != nil {
		dst = &progressWriter{w: f, total: uint64(max(0, resp.ContentLength)), report: a.o.Progress}
	}
	got, err := io.Copy(dst, io.LimitReader(resp.Body, limit+1))
	if cerr := f.Close(); err == nil && cerr != nil {
		return "", &fetchError{fmt.Errorf("ctlog: writing the tree: %w", cerr)}
	}
	if err != nil {
		return "", &fetchError{fmt.Errorf("ctlog: downloading the tree: %w", err)}
	}
	if got > limit {
		return "", fmt.Errorf("tree file over %d bytes, more than a tree of %d keys can need", limit, n)
	}
	return f.Name(), nil
}

type progressWriter struct {
	w      io.Writer
	done   uint64
	total  uint64
	last   time.Time
	report func(string, uint64, uint64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += uint64(n)
	if now := time.Now(); now.Sub(p.last) > 500*time.Millisecond {
		p.last = now
		p.report("tree", p.done, p.total)
	}
	return n, err
}

// logWalk is the state of one pass over the log's entries.
type logWalk struct {
	lcp  *checkpoint.Checkpoint
	head *checkpoint.Head // the head to check; nil if it did not verify
	v    note.Verifier    // the log's key, to open the heads in the log
	set  *setCompare      // nil without a usable tree
	feed *feedCompare     // nil without a verified head

	found      bool // an entry holding a head of the same tree was seen
	sortedIdx  uint64
	sortedLeaf [32]byte // its Merkle leaf hash
	certs      uint64   // certificates among the first head.Log.Size entries
	boundErr   error    // the first head.Log.Size entries do not hash to head.Log.Root
	badLeaf    error    // the first leaf that does not parse
}

// walk reads every entry under the log checkpoint in pages, hashing them
// into the log root, checking the root at the size of the log checkpoint
// the head is bound to, and handing each certificate among those first
// entries to the comparisons. It holds one page at a time.
func (a *remoteAuditor) walk(ctx context.Context, w *logWalk) error {
	f := &compact.RangeFactory{Hash: hasher.HashChildren}
	rng := f.NewEmptyRange(0)
	page := uint64(MaxEntries)
	size := w.lcp.Size
	checkBound := func() {
		if w.head == nil || rng.End() != w.head.Log.Size {
			return
		}
		root, err := rootOf(rng)
		if err == nil && root != w.head.Log.Root {
			err = fmt.Errorf("the log's first %d entries hash to %x, the head is bound to root %x", w.head.Log.Size, root, w.head.Log.Root)
		}
		w.boundErr = err
	}
	checkBound()
	for pos := uint64(0); pos < size; {
		n := min(page, size-pos)
		body, err := a.get(ctx, fmt.Sprintf("/v1/log/entries?start=%d&end=%d", pos, pos+n), a.o.MaxEntriesBytes, a.o.RequestTimeout)
		if errors.Is(err, errTooLarge) && page > 1 {
			page /= 2 // large chains: ask for fewer entries at a time
			continue
		}
		if err != nil {
			return err
		}
		es, err := parseEntries(body, pos, int(n))
		if err != nil {
			return fmt.Errorf("entries from %d: %w", pos, err)
		}
		for _, e := range es {
			lh := LeafHash(e.LeafInput)
			if err := rng.Append(lh[:], nil); err != nil {
				return err
			}
			checkBound()
			bound := w.head != nil && e.Index < w.head.Log.Size
			if !bound && w.found {
				continue // nothing after the bound entries matters but a head
			}
			lf, err := ParseLeaf(e.LeafInput)
			if err != nil {
				if w.badLeaf == nil {
					w.badLeaf = fmt.Errorf("entry %d: %w", e.Index, err)
				}
				continue
			}
			switch {
			case lf.Type == X509Entry && bound:
				// The head says its tree holds the certificates among the
				// first head.Log.Size entries.
				k := CertKey(lf.Data)
				if w.set != nil {
					w.set.add(k, e.Index)
				}
				if w.feed != nil {
					w.feed.next(ctx, w.certs, e.Index, k)
				}
				w.certs++
			case lf.Type == SortedRootEntry && w.head != nil && !w.found:
				if h, err := checkpoint.OpenHeadAnyAge(lf.Data, w.v); err == nil && h.Size == w.head.Size && h.Root == w.head.Root {
					w.found, w.sortedIdx, w.sortedLeaf = true, e.Index, lh
				}
			}
		}
		pos += uint64(len(es))
		if a.o.Progress != nil {
			a.o.Progress("entries", pos, size)
		}
	}
	root, err := rootOf(rng)
	if err != nil {
		return err
	}
	if root != w.lcp.Root {
		return fmt.Errorf("the %d entries served hash to %x, the checkpoint signs %x", size, root, w.lcp.Root)
	}
	return nil
}

// remoteEntry is the part of an entries answer the audit reads.
type remoteEntry struct {
	Index     uint64 `json:"index"`
	LeafInput []byte `json:"leaf_input"`
}

// parseEntries decodes a /v1/log/entries answer to a request for asked
// entries from start: one to asked entries, numbered consecutively from
// start, each with a leaf.
func parseEntries(body []byte, start uint64, asked int) ([]remoteEntry, error) {
	var r struct {
		Entries []remoteEntry `json:"entries"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("malformed entries answer: %w", err)
	}
	if len(r.Entries) == 0 {
		return nil, errors.New("no entries where the checkpoint promises some")
	}
	if len(r.Entries) > asked {
		return nil, fmt.Errorf("%d entries, asked for %d", len(r.Entries), asked)
	}
	for i, e := range r.Entries {
		if e.Index != start+uint64(i) {
			return nil, fmt.Errorf("entry %d of the answer is numbered %d, want %d", i, e.Index, start+uint64(i))
		}
		if len(e.LeafInput) == 0 {
			return nil, fmt.Errorf("entry %d has no leaf", e.Index)
		}
	}
	return r.Entries, nil
}

// ParseProofHashes decodes the hashes of an inclusion or consistency proof
// answer ({"hashes": [base64, …]}, docs/formats/api-proofs.md): at most 64 hashes of
// 32 bytes.
func ParseProofHashes(body []byte) ([][]byte, error) {
	var r struct {
		Hashes [][]byte `json:"hashes"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("malformed proof answer: %w", err)
	}
	if len(r.Hashes) > maxProofHashes {
		return nil, fmt.Errorf("proof of %d hashes, at most %d possible", len(r.Hashes), maxProofHashes)
	}
	for i, h := range r.Hashes {
		if len(h) != 32 {
			return nil, fmt.Errorf("proof hash %d is %d bytes, want 32", i, len(h))
		}
	}
	return r.Hashes, nil
}

// setCompare checks, one logged certificate at a time, that the tree holds
// exactly the logged keys: a bitmap over tree positions marks the keys
// seen, so the tree is the only copy of the set held.
type setCompare struct {
	tree    KeyList
	seen    []uint64
	missing uint64 // logged, not in the tree
	first   string // the first missing one
	dups    uint64 // logged twice
	firstD  string
}

func newSetCompare(t KeyList) *setCompare {
	return &setCompare{tree: t, seen: make([]uint64, (t.Size()+63)/64)}
}

// add records the key of a certificate logged at entry idx.
func (s *setCompare) add(k [32]byte, idx uint64) {
	i, ok := findKey(s.tree, k)
	switch {
	case !ok:
		if s.missing == 0 {
			s.first = fmt.Sprintf("certificate %x… (entry %d) is not in the tree", k[:8], idx)
		}
		s.missing++
	case s.seen[i/64]&(1<<(i%64)) != 0:
		if s.dups == 0 {
			s.firstD = fmt.Sprintf("certificate %x… is logged twice (again at entry %d)", k[:8], idx)
		}
		s.dups++
	default:
		s.seen[i/64] |= 1 << (i % 64)
	}
}

func (s *setCompare) result(w *logWalk) error {
	var errs []error
	if w.badLeaf != nil {
		errs = append(errs, fmt.Errorf("a leaf that does not parse: %w", w.badLeaf))
	}
	if w.certs != s.tree.Size() {
		errs = append(errs, fmt.Errorf("the first %d entries of the log, which the head is bound to, hold %d certificates; the tree holds %d keys", w.head.Log.Size, w.certs, s.tree.Size()))
	}
	if s.missing > 0 {
		errs = append(errs, fmt.Errorf("%d logged certificates missing from the tree; %s", s.missing, s.first))
	}
	if s.dups > 0 {
		errs = append(errs, fmt.Errorf("%d certificates logged more than once; %s", s.dups, s.firstD))
	}
	var extra, firstPos uint64
	for i := uint64(0); i < s.tree.Size(); i++ {
		if s.seen[i/64]&(1<<(i%64)) == 0 {
			if extra == 0 {
				firstPos = i
			}
			extra++
		}
	}
	if extra > 0 {
		k := s.tree.Key(firstPos)
		errs = append(errs, fmt.Errorf("%d tree keys were never logged; the first is %x… at position %d", extra, k[:8], firstPos))
	}
	return errors.Join(errs...)
}

// findKey finds k in the ascending keys of t.
func findKey(t KeyList, k [32]byte) (uint64, bool) {
	lo, hi := uint64(0), t.Size()
	for lo < hi {
		mid := lo + (hi-lo)/2
		m := t.Key(mid)
		switch c := bytes.Compare(m[:], k[:]); {
		case c == 0:
			return mid, true
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return lo, false
}

// feedCompare checks that the key feed provers sync from lists the
// certificates in log order: key i of the feed is the i-th certificate's.
type feedCompare struct {
	src      feed.Source
	size     uint64 // keys the sorted checkpoint covers
	buf      [][32]byte
	bufStart uint64
	err      error
}

func (f *feedCompare) next(ctx context.Context, seq, idx uint64, k [32]byte) {
	if f.err != nil || seq >= f.size {
		return
	}
	if seq >= f.bufStart+uint64(len(f.buf)) {
		f.bufStart = seq
		f.buf, f.err = f.src.Keys(ctx, seq, int(min(f.size-seq, feed.MaxKeys)))
		if f.err == nil && len(f.buf) == 0 {
			f.err = fmt.Errorf("the feed ends at %d keys, its checkpoint covers %d", seq, f.size)
		}
		if f.err != nil {
			return
		}
	}
	if got := f.buf[seq-f.bufStart]; got != k {
		f.err = fmt.Errorf("feed key %d is %x…, the certificate logged at entry %d is %x…", seq, got[:8], idx, k[:8])
	}
}

// result reports the first disagreement. Positions the log holds no
// certificate for are not compared: the set comparison reports the count.
func (f *feedCompare) result() error { return f.err }

// checkSortedEntry checks that the walk found an entry holding a head of
// the sorted tree and that the log proves its inclusion under the log
// checkpoint.
func (a *remoteAuditor) checkSortedEntry(ctx context.Context, w *logWalk) error {
	if w.badLeaf != nil && !w.found {
		return fmt.Errorf("no head of the sorted tree is in the log before %v", w.badLeaf)
	}
	if !w.found {
		return fmt.Errorf("no head of the sorted tree is among the log's %d entries", w.lcp.Size)
	}
	body, err := a.get(ctx, fmt.Sprintf("/v1/log/proof/inclusion?index=%d&size=%d", w.sortedIdx, w.lcp.Size), maxProofResponseBytes, a.o.RequestTimeout)
	if err != nil {
		return err
	}
	p, err := ParseProofHashes(body)
	if err != nil {
		return err
	}
	if err := proof.VerifyInclusion(hasher, w.sortedIdx, w.lcp.Size, w.sortedLeaf[:], p, w.lcp.Root[:]); err != nil {
		return fmt.Errorf("inclusion proof of entry %d under the log checkpoint: %w", w.sortedIdx, err)
	}
	return nil
}

// stateError is a problem with the auditor's own state file: an
// operational error, not evidence against the log.
type stateError struct{ err error }

func (e *stateError) Error() string { return e.err.Error() }
func (e *stateError) Unwrap() error { return e.err }

// checkState checks the log checkpoint lcp (signed note lmsg) against the
// one saved in the state file and, if it is consistent, saves it instead.
// first reports a first run: no state file yet, lcp saved.
func (a *remoteAuditor) checkState(ctx context.Context, lmsg []byte, lcp *checkpoint.Checkpoint) (first bool, err error) {
	prevMsg, err := readState(a.o.State)
	if errors.Is(err, os.ErrNotExist) {
		return true, saveState(a.o.State, lmsg)
	}
	if err != nil {
		return false, err
	}
	return false, a.checkConsistentWith(ctx, prevMsg, lmsg, lcp)
}

func (a *remoteAuditor) checkConsistentWith(ctx context.Context, prevMsg, lmsg []byte, lcp *checkpoint.Checkpoint) error {
	prev, err := checkpoint.Open(prevMsg, a.o.Verifier, a.o.Verifier.Name(), forever, forever, a.o.Now)
	if err != nil {
		return fmt.Errorf("the saved checkpoint in %s: %w", a.o.State, err)
	}
	var p [][]byte
	switch {
	case prev.Size > lcp.Size:
		return fmt.Errorf("the log shrank from %d entries (saved) to %d", prev.Size, lcp.Size)
	case prev.Size > 0 && prev.Size < lcp.Size:
		body, err := a.get(ctx, fmt.Sprintf("/v1/log/proof/consistency?first=%d&second=%d", prev.Size, lcp.Size), maxProofResponseBytes, a.o.RequestTimeout)
		if err != nil {
			return err
		}
		if p, err = ParseProofHashes(body); err != nil {
			return err
		}
	}
	// Equal sizes need equal roots; size 0 is consistent with anything.
	if err := proof.VerifyConsistency(hasher, prev.Size, lcp.Size, p, prev.Root[:], lcp.Root[:]); err != nil {
		return fmt.Errorf("the log at %d entries (root %x…) does not extend the saved checkpoint at %d (root %x…): %w",
			lcp.Size, lcp.Root[:8], prev.Size, prev.Root[:8], err)
	}
	return saveState(a.o.State, lmsg)
}

func readState(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, &stateError{fmt.Errorf("ctlog: reading the audit state: %w", err)}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, checkpoint.MaxSize+1))
	if err != nil {
		return nil, &stateError{fmt.Errorf("ctlog: reading the audit state: %w", err)}
	}
	if len(b) > checkpoint.MaxSize {
		return nil, &stateError{fmt.Errorf("ctlog: audit state %s is larger than a checkpoint can be", path)}
	}
	return b, nil
}

// saveState replaces the state file with msg: written to a temporary file
// (0600) in the same directory, synced, renamed over it, so a crash leaves
// the old checkpoint or the new one, never half of one.
func saveState(path string, msg []byte) error {
	if err := atomicfile.WriteFile(path, msg, 0o600); err != nil {
		return &stateError{fmt.Errorf("ctlog: saving the audit state: %w", err)}
	}
	return nil
}
