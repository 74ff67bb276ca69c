package feed

import (
	"context"
	"database/sql"
	"math"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

func TestQueryKeys(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE k (seq INTEGER PRIMARY KEY, key BLOB NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		var k [32]byte
		k[0], k[31] = byte(9-i), byte(i) // publication order is not key order
		if _, err := db.Exec(`INSERT INTO k (seq, key) VALUES (?, ?)`, i, k[:]); err != nil {
			t.Fatal(err)
		}
	}
	const q = `SELECT key FROM k WHERE seq >= ? AND seq < ? ORDER BY seq`
	for _, tc := range []struct {
		start, end uint64
		want       []byte // k[31] of each key returned
	}{
		{0, 10, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{3, 5, []byte{3, 4}},
		{8, 20, []byte{8, 9}},
		{10, 12, nil},
		{4, 4, nil},
	} {
		got, err := QueryKeys(ctx, db, q, tc.start, tc.end)
		if err != nil {
			t.Fatalf("[%d,%d): %v", tc.start, tc.end, err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("[%d,%d): %d keys, want %d", tc.start, tc.end, len(got), len(tc.want))
		}
		for i, k := range got {
			if k[31] != tc.want[i] || k[0] != 9-tc.want[i] {
				t.Errorf("[%d,%d): key %d is %x", tc.start, tc.end, i, k)
			}
		}
	}
	if _, err := QueryKeys(ctx, db, q, 5, 4); err == nil {
		t.Error("end before start accepted")
	}
	if _, err := db.Exec(`INSERT INTO k (seq, key) VALUES (10, x'0102')`); err != nil {
		t.Fatal(err)
	}
	if _, err := QueryKeys(ctx, db, q, 0, 11); err == nil || !strings.Contains(err.Error(), "key 10 is 2 bytes") {
		t.Errorf("short stored key: %v", err)
	}
	if _, err := QueryKeys(ctx, db, `SELECT nope FROM k WHERE seq >= ? AND seq < ?`, 0, 1); err == nil {
		t.Error("bad query accepted")
	}
}

// FuzzParseKeysQuery checks that whatever a keys request's query says,
// an accepted one asks for 1..MaxKeys keys from a start that fits in int64.
func FuzzParseKeysQuery(f *testing.F) {
	for _, s := range []string{"start=0", "start=5&count=10", "start=-1", "start=0&count=0", "start=9223372036854775807&count=99999999999", "count=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		start, count, err := parseKeysQuery(q)
		if err != nil {
			return
		}
		if count < 1 || count > MaxKeys || start > math.MaxInt64 {
			t.Fatalf("%q: start %d count %d", raw, start, count)
		}
	})
}
