package ctfollow

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
)

// The follower's parsers of what a log serves: checkpoints (signed notes
// with RFC 6962 note signatures), get-sth and get-entries JSON, and its own
// state file, which a disk may corrupt. None may panic; what they accept
// must be what was signed.

func fuzzKey(f *testing.F) (*logKey, guardedVerifier) {
	k := newLogKey(f, "fuzz.test/log")
	return k, guardedVerifier{mustVerifier(k.vkey)}
}

func FuzzCheckpoint(f *testing.F) {
	k, v := fuzzKey(f)
	good, err := noteSign("fuzz.test/log\n5\nHWCn6MVTtGNfkalBLvNW8MClSO5LRXzXUdSt9oIGljg=\n", k)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(shortSig(f, good))
	f.Add([]byte("fuzz.test/log\n5\n\n\n— fuzz.test/log AAAAAAAAAAAAAAAAAAA=\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, _, _, err := log.ParseCheckpoint(b, "fuzz.test/log", v)
		if err == nil && len(cp.Hash) != 32 {
			t.Fatalf("accepted a checkpoint with a %d-byte root", len(cp.Hash))
		}
	})
}

func FuzzSTH(f *testing.F) {
	_, v := fuzzKey(f)
	f.Add([]byte(`{"tree_size":5,"timestamp":1,"sha256_root_hash":"HWCn6MVTtGNfkalBLvNW8MClSO5LRXzXUdSt9oIGljg=","tree_head_signature":"BAM="}`))
	f.Add([]byte(`{"tree_size":5,"timestamp":1,"sha256_root_hash":"","tree_head_signature":"BAMAAQA="}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if cp, err := fnote.RFC6962STHToCheckpoint(b, v); err == nil {
			t.Fatalf("an unsigned STH verified: %q", cp)
		}
	})
}

func FuzzGetEntries(f *testing.F) {
	f.Add([]byte(`{"entries":[{"leaf_input":"AAAAAAAAAAAAAAAAAAMwAwIBAQAA","extra_data":"AAAA"}]}`), uint8(3))
	f.Add([]byte(`{"entries":[]}`), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		es, err := parseGetEntries(b, 10, 10+uint64(n))
		if err != nil {
			return
		}
		if len(es) == 0 || len(es) > int(n) {
			t.Fatalf("%d entries for %d asked", len(es), n)
		}
		for i := range es {
			if es[i].Index != 10+uint64(i) {
				t.Fatalf("entry %d has index %d", i, es[i].Index)
			}
			if _, err := es[i].LeafHash(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzStateFile(f *testing.F) {
	k, _ := fuzzKey(f)
	fol, err := Open(context.Background(), Config{Kind: KindStatic, URL: "http://127.0.0.1:1/", Key: k.vkey, Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	defer fol.Close()
	good, _ := json.Marshal(stateJSON{Version: stateVersion, Kind: KindStatic, Origin: "fuzz.test/log", Range: [][]byte{}})
	f.Add(good)
	f.Add([]byte(`{"version":1,"kind":"static-ct-api","origin":"fuzz.test/log","size":3,"range":["AA=="],"key_count":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := fol.parseState(b)
		if err == nil && st.Size > 0 && len(st.Checkpoint) == 0 {
			t.Fatal("a state of a non-empty tree without a checkpoint was accepted")
		}
	})
}
