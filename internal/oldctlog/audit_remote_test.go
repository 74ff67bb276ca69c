package oldctlog_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	. "github.com/pkie/pkie/internal/oldctlog"
	"github.com/pkie/pkie/sortedtree"
)

// Names of the remote audit's checks, as the report gives them.
const (
	chkLogSig     = "log checkpoint signed by the log"
	chkSortedSig  = "sorted-tree head signed by the log, bound to a log checkpoint it signed"
	chkWithin     = "the head's log checkpoint is within the log"
	chkTreeOpens  = "sorted tree file downloads and opens"
	chkTreeSize   = "tree size matches the head"
	chkTreeOrder  = "keys sorted without duplicates, every hash recomputed"
	chkTreeRoot   = "root matches the signed sorted-tree head"
	chkEntries    = "log entries hash to the signed log root"
	chkBound      = "the head's log checkpoint is the log's first entries"
	chkSameSet    = "tree holds exactly the certificates of the head's log checkpoint"
	chkFeed       = "key feed lists the logged certificates in log order"
	chkSortedLeaf = "sorted root appended to the log"
	chkConsistent = "log checkpoint consistent with the saved one"
)

var allChecks = []string{chkLogSig, chkSortedSig, chkTreeOpens, chkTreeSize, chkTreeOrder, chkTreeRoot,
	chkEntries, chkBound, chkSameSet, chkFeed, chkSortedLeaf, chkConsistent}

// rewrite serves h, but passes the answers to GETs of path through edit:
// the log's real handler, with a misbehaving front.
func rewrite(h http.Handler, path string, edit func(t *testing.T, body []byte) []byte, t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := edit(t, bytes.Clone(rec.Body.Bytes()))
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// treeKeysAt is where the keys start in a sorted tree file (format v1).
const treeKeysAt = 64

// resealTree fixes the root in a tampered tree file's header, as a
// careful forger would, so the file still opens.
func resealTree(f []byte) []byte {
	n := binary.BigEndian.Uint64(f[16:])
	keys := make(keySlice, n)
	for i := range keys {
		copy(keys[i][:], f[treeKeysAt+32*i:])
	}
	root, _ := CheckSortedOrder(keys)
	copy(f[24:56], root[:])
	return f
}

// signWithLogKey signs a checkpoint with the log's own key, as the log (or
// whoever stole its key) could.
func signWithLogKey(t *testing.T, l *Log, cp checkpoint.Checkpoint) []byte {
	t.Helper()
	skey, err := os.ReadFile(filepath.Join(l.Dir(), KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := checkpoint.Sign(cp, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// latestHead returns the log's latest sorted-tree head.
func latestHead(t *testing.T, l *Log) *checkpoint.Head {
	t.Helper()
	m, err := l.SortedCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h, err := checkpoint.OpenHeadAnyAge(m, l.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// signHeadWithLogKey signs h with the log's own key, as the log (or whoever
// stole its key) could, bound to the log checkpoint lmsg if not nil.
func signHeadWithLogKey(t *testing.T, l *Log, h checkpoint.Head, lmsg []byte) []byte {
	t.Helper()
	skey, err := os.ReadFile(filepath.Join(l.Dir(), KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		t.Fatal(err)
	}
	if lmsg != nil {
		if err := h.BindLog(lmsg, l.Verifier()); err != nil {
			t.Fatal(err)
		}
	}
	hs, err := checkpoint.HeadSigner(s, l.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := checkpoint.SignHead(h, hs)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func randKey(t *testing.T) [32]byte {
	var k [32]byte
	rand.Read(k[:])
	return k
}

func TestAuditRemote(t *testing.T) {
	ctx := context.Background()
	_, chains := issue(t, 8)
	type setup struct {
		l     *Log
		state string
	}
	for _, tc := range []struct {
		name string
		// build makes the log's sorted tree; nil means BuildSorted.
		build func(t *testing.T, l *Log) error
		// front wraps the log's handler; nil serves it as it is.
		front func(t *testing.T, l *Log, h http.Handler) http.Handler
		// state prepares the state file; nil leaves none (a first run).
		state func(t *testing.T, s setup)
		// key is the pinned verifier; nil means the log's.
		key    func(t *testing.T) note.Verifier
		fail   []string // the checks that must fail; every other must pass
		detail string   // a word the first failure's detail must hold
		absent []string // checks that must not be in the report
	}{
		{name: "honest log"},
		{name: "honest log, consistent with a saved checkpoint",
			state: func(t *testing.T, s setup) {
				// The checkpoint after the first three certificates.
				cps, err := s.l.Checkpoints(ctx, false, 100)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range cps {
					if c, _ := checkpoint.Parse(noteText(m)); c.Size == 3 {
						os.WriteFile(s.state, m, 0o600)
						return
					}
				}
				t.Fatal("no checkpoint of size 3")
			}},
		{name: "tampered tree file",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				return rewrite(h, "/v1/sorted/tree", func(t *testing.T, b []byte) []byte {
					b[treeKeysAt+2*32+5] ^= 0x40
					return b
				}, t)
			},
			fail: []string{chkTreeOpens}, detail: "root in header"},
		{name: "unsorted tree file, header resealed",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				return rewrite(h, "/v1/sorted/tree", func(t *testing.T, b []byte) []byte {
					a, c := b[treeKeysAt:treeKeysAt+32], b[treeKeysAt+32:treeKeysAt+64]
					tmp := bytes.Clone(a)
					copy(a, c)
					copy(c, tmp)
					return resealTree(b)
				}, t)
			},
			fail: []string{chkTreeOrder}, detail: "not sorted"},
		{name: "duplicated key in tree file, header resealed",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				return rewrite(h, "/v1/sorted/tree", func(t *testing.T, b []byte) []byte {
					copy(b[treeKeysAt+32:treeKeysAt+64], b[treeKeysAt:treeKeysAt+32])
					return resealTree(b)
				}, t)
			},
			fail: []string{chkTreeOrder}, detail: "duplicates"},
		{name: "a valid tree of other keys served",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				keys := make([][32]byte, 7) // as many as the checkpoint says
				for i := range keys {
					keys[i] = randKey(t)
				}
				path := filepath.Join(t.TempDir(), "other.tree")
				if err := sortedtree.Build(keys).WriteFile(path); err != nil {
					t.Fatal(err)
				}
				other, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				return rewrite(h, "/v1/sorted/tree", func(*testing.T, []byte) []byte { return other }, t)
			},
			fail: []string{chkTreeRoot}},
		{name: "tree missing a logged certificate, signed and appended",
			build: func(t *testing.T, l *Log) error {
				_, err := l.BuildSortedEdited(ctx, func(k [][32]byte) [][32]byte { return slices.Delete(k, 2, 3) })
				return err
			},
			fail: []string{chkSameSet}, detail: "missing from the tree"},
		{name: "tree with a key never logged, signed and appended",
			build: func(t *testing.T, l *Log) error {
				_, err := l.BuildSortedEdited(ctx, func(k [][32]byte) [][32]byte { return append(k, randKey(t)) })
				return err
			},
			fail: []string{chkSameSet}, detail: "never logged"},
		{name: "tree with a logged certificate swapped for another key",
			build: func(t *testing.T, l *Log) error {
				_, err := l.BuildSortedEdited(ctx, func(k [][32]byte) [][32]byte { k[4] = randKey(t); return k })
				return err
			},
			fail: []string{chkSameSet}, detail: "never logged"},
		{name: "an entry rewritten in transit",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				return rewrite(h, "/v1/log/entries", func(t *testing.T, b []byte) []byte {
					var r struct{ Entries []Entry }
					if err := json.Unmarshal(b, &r); err != nil {
						t.Error(err)
						return b
					}
					r.Entries[1].LeafInput[40] ^= 1
					out, _ := json.Marshal(map[string]any{"entries": r.Entries})
					return out
				}, t)
			},
			fail: []string{chkEntries}, detail: "hash to", absent: []string{chkSameSet, chkFeed, chkSortedLeaf}},
		{name: "entries numbered wrongly",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				return rewrite(h, "/v1/log/entries", func(t *testing.T, b []byte) []byte {
					return bytes.Replace(b, []byte(`"index":0,`), []byte(`"index":1,`), 1)
				}, t)
			},
			fail: []string{chkEntries}, detail: "numbered"},
		{name: "key feed out of log order",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				return rewrite(h, "/v1/sorted/keys", func(t *testing.T, b []byte) []byte {
					if len(b) >= 96 {
						tmp := bytes.Clone(b[32:64])
						copy(b[32:64], b[64:96])
						copy(b[64:96], tmp)
					}
					return b
				}, t)
			},
			fail: []string{chkFeed}, detail: "feed key 1"},
		{name: "head of a new tree signed but never appended",
			build: func(t *testing.T, l *Log) error {
				_, err := l.BuildSortedUnappended(ctx)
				return err
			},
			fail: []string{chkSortedLeaf}, detail: "no head of the sorted tree"},
		{name: "fresh head of an unchanged tree, not appended again",
			build: func(t *testing.T, l *Log) error {
				if _, err := l.BuildSorted(ctx); err != nil {
					return err
				}
				b, err := l.BuildSorted(ctx)
				if err == nil && b.Appended {
					t.Errorf("the second build of an unchanged tree appended its head at %d", b.EntryIndex)
				}
				return err
			}},
		{name: "head bound to a log root the log never had",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				head := latestHead(t, l)
				lmsg := signWithLogKey(t, l, checkpoint.Checkpoint{Origin: l.Origin(), Size: head.Log.Size, Root: randKey(t), Time: head.Log.Time})
				other := signHeadWithLogKey(t, l, *head, lmsg)
				return rewrite(h, "/v1/sorted/checkpoint", func(*testing.T, []byte) []byte { return other }, t)
			},
			fail: []string{chkBound}, detail: "bound to root"},
		{name: "head bound to an earlier log checkpoint than its tree's",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				head := latestHead(t, l)
				cps, err := l.Checkpoints(ctx, false, 100)
				if err != nil {
					t.Fatal(err)
				}
				var lmsg []byte
				for _, m := range cps { // the log checkpoint at 3 certificates
					if c, err := checkpoint.Open(m, l.Verifier(), l.Origin(), time.Hour, time.Hour, time.Now()); err == nil && c.Size == 3 {
						lmsg = m
					}
				}
				other := signHeadWithLogKey(t, l, *head, lmsg)
				return rewrite(h, "/v1/sorted/checkpoint", func(*testing.T, []byte) []byte { return other }, t)
			},
			fail: []string{chkSameSet}, detail: "hold 3 certificates"},
		{name: "head bound to a log checkpoint beyond the log",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				head := latestHead(t, l)
				lmsg := signWithLogKey(t, l, checkpoint.Checkpoint{Origin: l.Origin(), Size: 1000, Root: randKey(t), Time: head.Log.Time})
				other := signHeadWithLogKey(t, l, *head, lmsg)
				return rewrite(h, "/v1/sorted/checkpoint", func(*testing.T, []byte) []byte { return other }, t)
			},
			fail: []string{chkWithin}, detail: "1000", absent: []string{chkTreeOpens, chkBound, chkSameSet, chkSortedLeaf}},
		{name: "head bound to a log checkpoint signed by another key",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				head := latestHead(t, l)
				skey, vkey, _ := checkpoint.GenerateKey(l.Origin())
				s, _ := checkpoint.NewSigner(skey)
				v, _ := checkpoint.NewVerifier(vkey)
				lmsg, _ := checkpoint.Sign(head.Log, s)
				c := *head
				if err := c.BindLog(lmsg, v); err != nil {
					t.Fatal(err)
				}
				other := signHeadWithLogKey(t, l, c, nil)
				return rewrite(h, "/v1/sorted/checkpoint", func(*testing.T, []byte) []byte { return other }, t)
			},
			fail: []string{chkSortedSig}, detail: "not signed by the log's key"},
		{name: "sorted-tree root served as a checkpoint (the old format)",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				head := latestHead(t, l)
				old := signWithLogKey(t, l, checkpoint.Checkpoint{Origin: l.SortedOrigin(), Size: head.Size, Root: head.Root, Time: head.Time})
				return rewrite(h, "/v1/sorted/checkpoint", func(*testing.T, []byte) []byte { return old }, t)
			},
			fail: []string{chkSortedSig}, detail: "before sorted-tree heads"},
		{name: "forked: the saved checkpoint has another root",
			state: func(t *testing.T, s setup) {
				os.WriteFile(s.state, signWithLogKey(t, s.l, checkpoint.Checkpoint{Origin: s.l.Origin(), Size: 3,
					Root: randKey(t), Time: time.Now().Add(-time.Hour)}), 0o600)
			},
			fail: []string{chkConsistent}, detail: "does not extend"},
		{name: "forked at the same size",
			state: func(t *testing.T, s setup) {
				n, err := s.l.Size(ctx)
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(s.state, signWithLogKey(t, s.l, checkpoint.Checkpoint{Origin: s.l.Origin(), Size: n,
					Root: randKey(t), Time: time.Now().Add(-time.Hour)}), 0o600)
			},
			fail: []string{chkConsistent}, detail: "does not extend"},
		{name: "log shrank since the saved checkpoint",
			state: func(t *testing.T, s setup) {
				os.WriteFile(s.state, signWithLogKey(t, s.l, checkpoint.Checkpoint{Origin: s.l.Origin(), Size: 1000,
					Root: randKey(t), Time: time.Now().Add(-time.Hour)}), 0o600)
			},
			fail: []string{chkConsistent}, detail: "shrank"},
		{name: "saved checkpoint from another key",
			state: func(t *testing.T, s setup) {
				skey, _, _ := checkpoint.GenerateKey("pkie.test/log")
				signer, _ := note.NewSigner(skey)
				m, _ := checkpoint.Sign(checkpoint.Checkpoint{Origin: "pkie.test/log", Size: 2, Root: randKey(t), Time: time.Now()}, signer)
				os.WriteFile(s.state, m, 0o600)
			},
			fail: []string{chkConsistent}, detail: "saved checkpoint"},
		{name: "wrong pinned key",
			key: func(t *testing.T) note.Verifier {
				_, vkey, err := checkpoint.GenerateKey("pkie.test/log")
				if err != nil {
					t.Fatal(err)
				}
				v, err := note.NewVerifier(vkey)
				if err != nil {
					t.Fatal(err)
				}
				return v
			},
			fail: []string{chkLogSig}, absent: []string{chkSortedSig, chkTreeOpens, chkEntries, chkConsistent}},
		{name: "checkpoints of another origin",
			front: func(t *testing.T, l *Log, h http.Handler) http.Handler {
				// A checkpoint signed by the log, but for the sorted tree's
				// origin, served as the log checkpoint.
				n, err := l.Size(ctx)
				if err != nil {
					t.Fatal(err)
				}
				m := signWithLogKey(t, l, checkpoint.Checkpoint{Origin: l.SortedOrigin(), Size: n, Root: randKey(t), Time: time.Now()})
				return rewrite(h, "/v1/log/checkpoint", func(*testing.T, []byte) []byte { return m }, t)
			},
			fail: []string{chkLogSig}, detail: "origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLog(t)
			// Three certificates, a first build, five more, the audited
			// build, and one certificate logged after it.
			if _, err := l.AddChains(ctx, chains[:3]); err != nil {
				t.Fatal(err)
			}
			if _, err := l.BuildSorted(ctx); err != nil {
				t.Fatal(err)
			}
			for _, c := range chains[3:7] {
				if _, err := l.AddChain(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			build := tc.build
			if build == nil {
				build = func(t *testing.T, l *Log) error { _, err := l.BuildSorted(ctx); return err }
			}
			if err := build(t, l); err != nil {
				t.Fatal(err)
			}
			if _, err := l.AddChain(ctx, chains[7]); err != nil {
				t.Fatal(err)
			}
			var h http.Handler = l.Handler(HandlerOptions{})
			if tc.front != nil {
				h = tc.front(t, l, h)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			s := setup{l: l, state: filepath.Join(t.TempDir(), "audit.state")}
			if tc.state != nil {
				tc.state(t, s)
			}
			v := l.Verifier()
			if tc.key != nil {
				v = tc.key(t)
			}
			rep, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv.URL, Verifier: v, State: s.state, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			var firstDetail string
			for _, c := range rep.Checks {
				if !c.OK {
					if failed == nil {
						firstDetail = c.Detail
					}
					failed = append(failed, c.Name)
				}
			}
			if !slices.Equal(failed, tc.fail) {
				t.Fatalf("failed checks %q, want %q\n%s", failed, tc.fail, reportText(rep))
			}
			if rep.OK() != (len(tc.fail) == 0) {
				t.Errorf("OK() = %v with failures %q", rep.OK(), failed)
			}
			if !strings.Contains(firstDetail, tc.detail) {
				t.Errorf("failure detail %q does not mention %q", firstDetail, tc.detail)
			}
			names := map[string]bool{}
			for _, c := range rep.Checks {
				names[c.Name] = true
			}
			for _, n := range tc.absent {
				if names[n] {
					t.Errorf("check %q ran although its input failed an earlier check", n)
				}
			}
			if tc.fail == nil {
				for _, n := range allChecks {
					if !names[n] {
						t.Errorf("check %q missing from a passing report", n)
					}
				}
				if rep.LogSize != 10 || rep.SortedSize != 7 {
					t.Errorf("report sizes: log %d sorted %d, want 10 and 7", rep.LogSize, rep.SortedSize)
				}
			}
		})
	}
}

// noteText is the text of a signed note, without signatures.
func noteText(msg []byte) []byte {
	i := bytes.Index(msg, []byte("\n\n"))
	return msg[:i+1]
}

func reportText(rep *AuditReport) string {
	var b strings.Builder
	for _, c := range rep.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		b.WriteString(mark + " " + c.Name + ": " + c.Detail + "\n")
	}
	return b.String()
}

// TestAuditRemoteState follows an auditor across runs: the first run saves
// the checkpoint (0600); after the log grows the next run proves
// consistency with it and saves the new one; a log that then forks fails.
func TestAuditRemoteState(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	_, chains := issue(t, 4)
	srv := httptest.NewServer(l.Handler(HandlerOptions{}))
	defer srv.Close()
	state := filepath.Join(t.TempDir(), "state")
	audit := func() *AuditReport {
		t.Helper()
		rep, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv.URL + "/", Verifier: l.Verifier(), State: state})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	last := func(rep *AuditReport) AuditCheck { return rep.Checks[len(rep.Checks)-1] }
	saved := func() *checkpoint.Checkpoint {
		t.Helper()
		fi, err := os.Stat(state)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
		}
		m, _ := os.ReadFile(state)
		c, err := checkpoint.Open(m, l.Verifier(), l.Origin(), time.Hour, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for i, c := range chains {
		if _, err := l.AddChain(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := l.BuildSorted(ctx); err != nil {
			t.Fatal(err)
		}
		rep := audit()
		if !rep.OK() {
			t.Fatalf("run %d failed:\n%s", i, reportText(rep))
		}
		first := strings.Contains(last(rep).Detail, "first run")
		if first != (i == 0) || last(rep).Name != chkConsistent {
			t.Errorf("run %d: last check %+v", i, last(rep))
		}
		if got := saved(); got.Size != uint64(2*(i+1)) || got.Size != rep.LogSize {
			t.Errorf("run %d: saved size %d, log size %d, want %d", i, got.Size, rep.LogSize, 2*(i+1))
		}
	}
	// The same log, seen again with nothing new, stays consistent.
	if rep := audit(); !rep.OK() {
		t.Fatalf("unchanged log failed:\n%s", reportText(rep))
	}
	// A fork the auditor saw earlier stays in the state: a failed run does
	// not replace the saved checkpoint.
	forked := signWithLogKey(t, l, checkpoint.Checkpoint{Origin: l.Origin(), Size: 5, Root: randKey(t), Time: time.Now()})
	if err := os.WriteFile(state, forked, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if rep := audit(); rep.OK() || last(rep).OK {
			t.Fatalf("fork not caught:\n%s", reportText(rep))
		}
	}
	if m, _ := os.ReadFile(state); !bytes.Equal(m, forked) {
		t.Error("a failed consistency check replaced the saved checkpoint")
	}
}

// TestAuditRemoteOperationalErrors: an audit that cannot run is an error,
// not a failed check.
func TestAuditRemoteOperationalErrors(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	srv := httptest.NewServer(l.Handler(HandlerOptions{}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		name string
		o    RemoteAuditOptions
		want string
	}{
		{"no URL", RemoteAuditOptions{Verifier: l.Verifier()}, "not an http(s) URL"},
		{"not http", RemoteAuditOptions{URL: "ftp://127.0.0.1/", Verifier: l.Verifier()}, "not an http(s) URL"},
		{"no key", RemoteAuditOptions{URL: srv.URL}, "no pinned verifier"},
		{"log down", RemoteAuditOptions{URL: closed.URL, Verifier: l.Verifier()}, "connection refused"},
		{"no sorted tree yet", RemoteAuditOptions{URL: srv.URL, Verifier: l.Verifier()}, "404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := AuditRemote(ctx, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v (report %v), want one mentioning %q", err, rep, tc.want)
			}
		})
	}
	// An unwritable state directory is the auditor's problem, not the log's.
	if _, err := l.BuildSorted(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv.URL, Verifier: l.Verifier(), State: filepath.Join(t.TempDir(), "missing", "state")})
	if err == nil || !strings.Contains(err.Error(), "audit state") {
		t.Errorf("unwritable state: %v", err)
	}
}

// TestAuditRemoteBounds: a tree file larger than a tree of the signed size
// can be is refused without reading it all, and large entry pages are
// split.
func TestAuditRemoteBounds(t *testing.T) {
	ctx := context.Background()
	l, _ := filledLog(t, 3)
	if _, err := l.BuildSorted(ctx); err != nil {
		t.Fatal(err)
	}
	big := rewrite(l.Handler(HandlerOptions{}), "/v1/sorted/tree", func(_ *testing.T, b []byte) []byte {
		return append(b, make([]byte, 1<<20)...)
	}, t)
	srv := httptest.NewServer(big)
	defer srv.Close()
	rep, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv.URL, Verifier: l.Verifier()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if c.Name == chkTreeOpens && (c.OK || !strings.Contains(c.Detail, "more than")) {
			t.Errorf("oversized tree: %+v", c)
		}
	}
	if rep.OK() {
		t.Error("oversized tree passed")
	}

	// Entry pages over the bound are asked for again in halves; an entry
	// alone over it fails the audit.
	srv2 := httptest.NewServer(l.Handler(HandlerOptions{}))
	defer srv2.Close()
	if es, _ := l.Entries(ctx, 0, 4); len(mustJSON(t, map[string]any{"entries": es})) <= 2<<10 {
		t.Fatal("the entries fit one page under the bound: nothing to halve")
	}
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{2 << 10, true}, {200, false}} {
		rep, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv2.URL, Verifier: l.Verifier(), MaxEntriesBytes: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() != tc.ok {
			t.Errorf("entries bound %d: OK %v, want %v\n%s", tc.limit, rep.OK(), tc.ok, reportText(rep))
		}
		if !tc.ok && !strings.Contains(reportText(rep), "too large") {
			t.Errorf("entries bound %d: failure does not say the answer was too large\n%s", tc.limit, reportText(rep))
		}
	}
}

// countingHandler counts the bytes of the answers h writes.
type countingHandler struct {
	h http.Handler
	n atomic.Int64
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.h.ServeHTTP(countingWriter{w, &c.n}, r)
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n.Add(int64(n))
	return n, err
}

// BenchmarkAuditRemote audits a 20,000-certificate log over loopback HTTP:
// every entry read and hashed, the tree downloaded and re-hashed, the set
// and feed compared, the inclusion proof checked. Reported per logged
// certificate: time and answer bytes read. The fetch-entries ceiling only
// fetches the same entry pages and discards them: what the log's serving
// costs, whatever the auditor does.
func BenchmarkAuditRemote(b *testing.B) {
	const n = 20_000
	ctx := context.Background()
	l := newTestLog(b)
	for done := 0; done < n; done += ImportBatch {
		_, chains := issue(b, min(ImportBatch, n-done))
		if _, err := l.AddChains(ctx, chains); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := l.BuildSorted(ctx); err != nil {
		b.Fatal(err)
	}
	size, err := l.Size(ctx)
	if err != nil {
		b.Fatal(err)
	}
	ch := &countingHandler{h: l.Handler(HandlerOptions{})}
	srv := httptest.NewServer(ch)
	defer srv.Close()
	tmp := b.TempDir()
	b.Run("audit", func(b *testing.B) {
		ch.n.Store(0)
		for b.Loop() {
			rep, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv.URL, Verifier: l.Verifier(), TempDir: tmp})
			if err != nil || !rep.OK() {
				b.Fatalf("%v %+v", err, rep)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/cert")
		b.ReportMetric(float64(ch.n.Load())/float64(b.N*n), "bytes/cert")
	})
	b.Run("fetch-entries-only", func(b *testing.B) {
		for b.Loop() {
			// Pages may stop short of MaxEntries (a byte budget): page
			// from where the last one ended, as every client must.
			for pos := uint64(0); pos < size; {
				resp, err := http.Get(fmt.Sprintf("%s/v1/log/entries?start=%d&end=%d", srv.URL, pos, min(size, pos+MaxEntries)))
				if err != nil {
					b.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				// Counting is enough: base64 and hex never hold a quote.
				got := bytes.Count(body, []byte(`"index":`))
				if err != nil || got == 0 {
					b.Fatalf("entries from %d: %d, %v", pos, got, err)
				}
				pos += uint64(got)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/cert")
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
