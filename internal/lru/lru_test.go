package lru

import (
	"sync"
	"testing"
)

// TestCache: the least recently used entry goes first, Get counts as a
// use, Put replaces, and a cache of no capacity holds nothing.
func TestCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int
		ops  func(c *Cache[string, int])
		want map[string]int // what Get finds afterwards; absent keys must be gone
		gone []string
	}{
		{"evicts the oldest", 2, func(c *Cache[string, int]) { c.Put("a", 1); c.Put("b", 2); c.Put("c", 3) },
			map[string]int{"b": 2, "c": 3}, []string{"a"}},
		{"get is a use", 2, func(c *Cache[string, int]) { c.Put("a", 1); c.Put("b", 2); c.Get("a"); c.Put("c", 3) },
			map[string]int{"a": 1, "c": 3}, []string{"b"}},
		{"put replaces", 2, func(c *Cache[string, int]) { c.Put("a", 1); c.Put("a", 5); c.Put("b", 2) },
			map[string]int{"a": 5, "b": 2}, nil},
		{"no capacity", 0, func(c *Cache[string, int]) { c.Put("a", 1) }, nil, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string, int](tc.max)
			tc.ops(c)
			for k, v := range tc.want {
				if got, ok := c.Get(k); !ok || got != v {
					t.Errorf("Get(%q) = %d, %v; want %d", k, got, ok, v)
				}
			}
			for _, k := range tc.gone {
				if _, ok := c.Get(k); ok {
					t.Errorf("Get(%q) found an entry that should be gone", k)
				}
			}
			if c.Len() != len(tc.want) {
				t.Errorf("Len = %d, want %d", c.Len(), len(tc.want))
			}
		})
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := New[int, int](16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				c.Put(i%32, g)
				c.Get((i + g) % 32)
			}
		})
	}
	wg.Wait()
	if c.Len() != 16 {
		t.Errorf("Len = %d, want 16", c.Len())
	}
}
