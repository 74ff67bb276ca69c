package feed

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
)

type sliceSource [][32]byte

func (s sliceSource) LatestCheckpoint(context.Context) ([]byte, error) {
	if len(s) == 0 {
		return nil, ErrNoCheckpoint
	}
	return []byte("cp\n"), nil
}

func (s sliceSource) Keys(_ context.Context, start uint64, n int) ([][32]byte, error) {
	if start >= uint64(len(s)) {
		return nil, nil
	}
	return s[start:min(uint64(len(s)), start+uint64(n))], nil
}

func TestFeedOverHTTP(t *testing.T) {
	keys := make(sliceSource, MaxKeys+10)
	for i := range keys {
		keys[i][0], keys[i][1], keys[i][31] = byte(i>>8), byte(i), 7
	}
	srv := httptest.NewServer(http.StripPrefix("/f", Handler(keys)))
	defer srv.Close()
	c := &Client{Base: srv.URL + "/f/"}
	ctx := context.Background()
	if cp, err := c.LatestCheckpoint(ctx); err != nil || string(cp) != "cp\n" {
		t.Fatalf("checkpoint %q %v", cp, err)
	}
	got, err := FetchAll(ctx, c, 5, uint64(len(keys)), nil)
	if err != nil || len(got) != len(keys)-5 || got[0] != keys[5] || got[len(got)-1] != keys[len(keys)-1] {
		t.Fatalf("FetchAll: %d keys, %v", len(got), err)
	}
	if _, err := FetchAll(ctx, c, 0, uint64(len(keys))+1, nil); err == nil {
		t.Error("a feed shorter than promised was not reported")
	}
	empty := httptest.NewServer(Handler(sliceSource{}))
	defer empty.Close()
	if _, err := (&Client{Base: empty.URL}).LatestCheckpoint(ctx); err != ErrNoCheckpoint {
		t.Errorf("no checkpoint: %v", err)
	}
	for _, q := range []string{"", "?start=x", "?start=-1", "?start=0&count=0", "?start=0&count=abc"} {
		resp, err := http.Get(srv.URL + "/f/keys" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("keys%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

// TestFetchAllHugeEnd checks that a checkpoint promising far more keys than
// the feed holds is an error, not a panic or an allocation of its size.
func TestFetchAllHugeEnd(t *testing.T) {
	keys := make(sliceSource, 3)
	srv := httptest.NewServer(Handler(keys))
	defer srv.Close()
	c := &Client{Base: srv.URL}
	for _, tt := range []struct {
		name       string
		start, end uint64
	}{
		{"2^62 keys", 0, 1 << 62},
		{"max uint64", 0, math.MaxUint64},
		{"near the top", math.MaxUint64 - 5, math.MaxUint64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FetchAll(context.Background(), c, tt.start, tt.end, nil)
			if err == nil {
				t.Fatal("a feed shorter than promised was not reported")
			}
		})
	}
}

func FuzzDecodeKeys(f *testing.F) {
	f.Add(make([]byte, 64), 2)
	f.Add(make([]byte, 33), 5)
	f.Fuzz(func(t *testing.T, b []byte, max int) {
		ks, err := DecodeKeys(b, max)
		if err != nil {
			return
		}
		if 32*len(ks) != len(b) || len(ks) > max {
			t.Fatalf("%d bytes, max %d: %d keys", len(b), max, len(ks))
		}
	})
}

func TestCheckpointHandler(t *testing.T) {
	for _, tt := range []struct {
		name string
		cp   []byte
		err  error
		code int
	}{
		{"published", []byte("note\n"), nil, http.StatusOK},
		{"none yet", nil, ErrNoCheckpoint, http.StatusNotFound},
		{"storage failing", nil, errors.New("disk gone"), http.StatusInternalServerError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := CheckpointHandler(func(context.Context) ([]byte, error) { return tt.cp, tt.err })
			rec := httptest.NewRecorder()
			h(rec, httptest.NewRequest(http.MethodGet, "/checkpoint", nil))
			if rec.Code != tt.code || rec.Header().Get("Cache-Control") != "no-store" && tt.code == http.StatusOK {
				t.Fatalf("%d %q (Cache-Control %q), want %d", rec.Code, rec.Body, rec.Header().Get("Cache-Control"), tt.code)
			}
			if tt.code == http.StatusOK && rec.Body.String() != string(tt.cp) {
				t.Fatalf("body %q, want %q", rec.Body, tt.cp)
			}
		})
	}
}
