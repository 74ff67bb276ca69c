package ctfollow

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/ctwire"

	"golang.org/x/mod/sumdb/note"
)

// TestHostileLogs shows a follower a log that misbehaves after a good
// sync: each misbehaviour is refused with its error, nothing is persisted,
// the last good state stays, and once the log behaves the follower moves
// on.
func TestHostileLogs(t *testing.T) {
	flipInside := func(b []byte, off int) []byte {
		b = bytes.Clone(b)
		if off < len(b) {
			b[off] ^= 1
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		kind   string
		tamper func(e *env) func(p string, b []byte) []byte
		serve  func(e *env) *testLog // serve another log's files entirely
		want   any                   // pointer to the wanted error type, or nil for any error
	}{
		{name: "rollback", kind: KindStatic, want: new(*RollbackError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("checkpoint", func([]byte) []byte { return e.old })
		}},
		{name: "fork at the same size", kind: KindStatic, want: new(*ForkError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("checkpoint", func([]byte) []byte { return e.forkCP })
		}},
		{name: "fork, larger and inconsistent", kind: KindStatic, want: new(*ForkError), serve: func(e *env) *testLog { return e.fork }},
		{name: "checkpoint signed by another key", kind: KindStatic, want: new(*CheckpointError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("checkpoint", func(b []byte) []byte { return resign(t, b, e.other) })
		}},
		{name: "checkpoint with a short signature", kind: KindStatic, want: new(*CheckpointError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("checkpoint", func(b []byte) []byte { return shortSig(t, b) })
		}},
		{name: "checkpoint junk", kind: KindStatic, want: new(*CheckpointError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("checkpoint", func([]byte) []byte { return []byte("junk\n") })
		}},
		{name: "data tile altered", kind: KindStatic, want: new(*EntriesError), tamper: func(e *env) func(string, []byte) []byte {
			// Entry 300, the first new one: entries before it were
			// verified already and are skipped.
			return onPrefix("tile/data/001", func(b []byte) []byte { return flipEntry(t, b, 300) })
		}},
		{name: "data tile truncated", kind: KindStatic, want: new(*EntriesError), tamper: func(e *env) func(string, []byte) []byte {
			return onPrefix("tile/data/001", func(b []byte) []byte { return b[:len(b)-10] })
		}},
		{name: "data tile of other indices", kind: KindStatic, want: new(*EntriesError), tamper: func(e *env) func(string, []byte) []byte {
			first, _ := os.ReadFile(e.fx.log.root + "/tile/data/000")
			return onPrefix("tile/data/001", func([]byte) []byte { return first })
		}},
		{name: "data tile huge", kind: KindStatic, want: nil, tamper: func(e *env) func(string, []byte) []byte {
			return onPrefix("tile/data/001", func([]byte) []byte { return []byte(hugeMarker) })
		}},
		{name: "hash tiles truncated", kind: KindStatic, want: nil, tamper: func(e *env) func(string, []byte) []byte {
			return func(p string, b []byte) []byte {
				if strings.HasPrefix(p, "tile/0/") || strings.HasPrefix(p, "tile/1/") {
					return b[:len(b)/2]
				}
				return b
			}
		}},
		{name: "hash tiles altered", kind: KindStatic, want: new(*ForkError), tamper: func(e *env) func(string, []byte) []byte {
			return func(p string, b []byte) []byte {
				if strings.HasPrefix(p, "tile/0/") {
					return flipInside(b, 5)
				}
				return b
			}
		}},
		{name: "STH signature altered", kind: KindRFC6962, want: new(*CheckpointError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("ct/v1/get-sth", func(b []byte) []byte {
				return editJSON(t, b, func(m map[string]any) {
					sig, _ := base64.StdEncoding.DecodeString(m["tree_head_signature"].(string))
					sig[len(sig)-3] ^= 1
					m["tree_head_signature"] = sig
				})
			})
		}},
		{name: "STH signature short", kind: KindRFC6962, want: new(*CheckpointError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("ct/v1/get-sth", func(b []byte) []byte {
				return editJSON(t, b, func(m map[string]any) { m["tree_head_signature"] = []byte{4, 3} })
			})
		}},
		{name: "STH of an older tree", kind: KindRFC6962, want: new(*RollbackError), serve: func(e *env) *testLog {
			// A log of the same key and origin holding 100 entries.
			return e.fork100()
		}},
		{name: "consistency proof altered", kind: KindRFC6962, want: new(*ForkError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("ct/v1/get-sth-consistency", func(b []byte) []byte {
				return editJSON(t, b, func(m map[string]any) {
					p := m["consistency"].([]any)
					p[0] = base64.StdEncoding.EncodeToString(make([]byte, 32))
				})
			})
		}},
		{name: "get-entries altered", kind: KindRFC6962, want: new(*EntriesError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("ct/v1/get-entries", func(b []byte) []byte {
				return editJSON(t, b, func(m map[string]any) {
					es := m["entries"].([]any)
					le := es[len(es)-1].(map[string]any)
					li, _ := base64.StdEncoding.DecodeString(le["leaf_input"].(string))
					le["leaf_input"] = flipInside(li, 100)
				})
			})
		}},
		{name: "get-entries junk", kind: KindRFC6962, want: new(*EntriesError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("ct/v1/get-entries", func([]byte) []byte { return []byte(`{"entries":[{"leaf_input":"AAAA","extra_data":""}]}`) })
		}},
		{name: "get-entries empty", kind: KindRFC6962, want: new(*EntriesError), tamper: func(e *env) func(string, []byte) []byte {
			return onPath("ct/v1/get-entries", func([]byte) []byte { return []byte(`{"entries":[]}`) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			e := &env{t: t, fx: fx, other: newLogKey(t, fx.log.key.origin)}
			fx.grow(100)
			e.old = fx.log.checkpoint()
			fx.grow(200)
			var refusals []string
			c := fx.config(tc.kind)
			c.OnRefuse = func(r string, _ error) { refusals = append(refusals, r) }
			f, err := Open(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Sync(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			good := f.State()
			goodKeys, _ := os.ReadFile(f.KeysPath())
			goodState, _ := os.ReadFile(fx.dir + "/" + StateFile)

			if strings.HasPrefix(tc.name, "fork") {
				e.fork = newTestLog(t, fx.log.key)
				es, ks, _ := fx.cf.entries(300)
				e.fork.addEntries(es, ks)
				e.forkCP = e.fork.checkpoint()
				es, ks, _ = fx.cf.entries(100)
				e.fork.addEntries(es, ks)
			}
			fx.grow(100)
			if tc.tamper != nil {
				fx.srv.setTamper(tc.tamper(e))
			}
			if tc.serve != nil {
				fx.srv.setLog(tc.serve(e))
			}

			_, err = f.Sync(context.Background(), nil)
			if err == nil {
				t.Fatal("Sync accepted the log's misbehaviour")
			}
			t.Logf("refused: %v", err)
			if tc.want != nil && !errors.As(err, tc.want) {
				t.Fatalf("Sync error %T (%v), want %T", err, err, tc.want)
			}
			if tc.want != nil && (len(refusals) != 1 || refusals[0] != Reason(err)) {
				t.Errorf("OnRefuse calls %v, want one with %q", refusals, Reason(err))
			}
			st := f.State()
			if st.Size != good.Size || !bytes.Equal(st.Root, good.Root) || st.KeyCount != good.KeyCount {
				t.Fatalf("state moved to %d after a refusal", st.Size)
			}
			if b, _ := os.ReadFile(f.KeysPath()); !bytes.Equal(b, goodKeys) {
				t.Fatalf("keys file changed after a refusal: %d bytes, had %d", len(b), len(goodKeys))
			}
			if b, _ := os.ReadFile(fx.dir + "/" + StateFile); !bytes.Equal(b, goodState) {
				t.Fatal("state file changed after a refusal")
			}

			// The log behaves again: the follower moves on.
			fx.srv.setTamper(nil)
			fx.srv.setLog(fx.log)
			if st, err := f.Sync(context.Background(), nil); err != nil || st.Size != 400 {
				t.Fatalf("Sync after the log recovered: %v, %v", st, err)
			}
			fx.checkState(f, 400)
		})
	}
}

// env is what a hostile case draws on.
type env struct {
	t      *testing.T
	fx     *fixture
	old    []byte   // a checkpoint of size 100, signed by the log
	fork   *testLog // the same key, other entries: 300 then 400
	forkCP []byte   // fork's checkpoint at size 300
	other  *logKey  // same origin, another key
}

// fork100 returns a log under the same key holding 100 entries of its own.
func (e *env) fork100() *testLog {
	l := newTestLog(e.t, e.fx.log.key)
	es, ks, _ := e.fx.cf.entries(100)
	l.addEntries(es, ks)
	return l
}

// flipEntry flips a byte inside the certificate of entry index of data
// tile b: a byte the tree commits to.
func flipEntry(t *testing.T, b []byte, index uint64) []byte {
	es, err := ctwire.ParseDataTile(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Index == index {
			off := bytes.Index(b, e.Certificate)
			b = bytes.Clone(b)
			b[off+len(e.Certificate)/2] ^= 1
			return b
		}
	}
	t.Fatalf("no entry %d in the tile", index)
	return nil
}

// TestIssuerMismatch: a static-ct-api log serving, under an issuer's
// fingerprint, other bytes is refused; the follower keys certificates by
// issuers it checked.
func TestIssuerMismatch(t *testing.T) {
	fx := newFixture(t)
	fx.grow(10)
	fx.srv.setTamper(onPrefix("issuer/", func(b []byte) []byte { b = bytes.Clone(b); b[100] ^= 1; return b }))
	f := fx.open(KindStatic)
	_, err := f.Sync(context.Background(), nil)
	var ee *EntriesError
	if !errors.As(err, &ee) {
		t.Fatalf("Sync = %v, want an EntriesError", err)
	}
	if st := f.State(); st.Size != 0 {
		t.Fatalf("state moved to %d", st.Size)
	}
	fx.srv.setTamper(nil)
	if _, err := f.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	fx.checkState(f, 10)
}

func onPath(path string, f func([]byte) []byte) func(string, []byte) []byte {
	return func(p string, b []byte) []byte {
		if p == path {
			return f(b)
		}
		return b
	}
}

func onPrefix(prefix string, f func([]byte) []byte) func(string, []byte) []byte {
	return func(p string, b []byte) []byte {
		if strings.HasPrefix(p, prefix) && b != nil {
			return f(b)
		}
		return b
	}
}

// resign returns checkpoint cp's text signed by k instead.
func resign(t *testing.T, cp []byte, k *logKey) []byte {
	text, _, _ := bytes.Cut(cp, []byte("\n\n"))
	n, err := noteSign(string(text)+"\n", k)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func noteSign(text string, k *logKey) ([]byte, error) {
	return note.Sign(&note.Note{Text: text}, k.signer)
}

// shortSig returns cp with its signature cut to a key hash and 9 bytes:
// a timestamp and one byte, which formats/note's RFC 6962 verifier would
// index past.
func shortSig(t testing.TB, cp []byte) []byte {
	text, sigs, _ := bytes.Cut(cp, []byte("\n\n"))
	fields := strings.Fields(string(sigs))
	raw, err := base64.StdEncoding.DecodeString(fields[2])
	if err != nil {
		t.Fatal(err)
	}
	return []byte(string(text) + "\n\n— " + fields[1] + " " + base64.StdEncoding.EncodeToString(raw[:4+9]) + "\n")
}

func editJSON(t *testing.T, b []byte, edit func(map[string]any)) []byte {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
