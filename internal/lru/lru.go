// Package lru is a bounded map, safe for concurrent use, that forgets the
// least recently used entry first: the caches of verified evidence (tree
// heads, tiles, SCT leaf hashes) that clients and provers keep so that a
// second connection to the same site costs a lookup, not a signature.
package lru

import (
	"container/list"
	"sync"
)

// Cache holds at most its capacity of entries.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *entry, most recent first
	m     map[K]*list.Element
}

type entry[K comparable, V any] struct {
	k K
	v V
}

// New returns a Cache of at most max entries; with max ≤ 0 it holds none.
func New[K comparable, V any](max int) *Cache[K, V] {
	return &Cache[K, V]{max: max, order: list.New(), m: make(map[K]*list.Element)}
}

// Get returns k's value and marks it most recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[k]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry[K, V]).v, true
	}
	var zero V
	return zero, false
}

// Put sets k's value, forgetting the least recently used entries beyond
// the capacity.
func (c *Cache[K, V]) Put(k K, v V) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[k]; ok {
		el.Value.(*entry[K, V]).v = v
		c.order.MoveToFront(el)
		return
	}
	c.m[k] = c.order.PushFront(&entry[K, V]{k, v})
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.m, old.Value.(*entry[K, V]).k)
	}
}

// Len returns the number of entries held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
