package notary

import (
	"fmt"
	"testing"
)

// The signed-answer cache is bounded in bytes and evicts only what it must
// when full, not everything: a notary with more targets than it holds keeps
// most answers signed.
func TestSignedCacheEvictsOne(t *testing.T) {
	var c signedCache
	c.init(100 * 10) // 100 entries of 10 bytes (key and body)
	for i := range 1050 {
		c.put(fmt.Sprintf("%05d", i), []byte("12345"))
		if c.bytes > 1000 {
			t.Fatalf("%d bytes held; the bound is 1000", c.bytes)
		}
	}
	if len(c.m) != 100 {
		t.Fatalf("%d entries held after 1050 puts; want the bound's 100 (clearing everything leaves fewer)", len(c.m))
	}
	if _, ok := c.get("01049"); !ok {
		t.Fatal("the newest answer was evicted")
	}
	// An answer larger than the whole bound is not kept, and evicts
	// nothing.
	c.put("big", make([]byte, 2000))
	if _, ok := c.get("big"); ok || len(c.m) != 100 {
		t.Fatalf("an answer over the bound was kept (%v) or evicted others (%d left)", ok, len(c.m))
	}
	// Replacing an entry counts its bytes once.
	c.put("01049", []byte("12345"))
	if c.bytes != 1000 {
		t.Fatalf("%d bytes after replacing an entry; want 1000", c.bytes)
	}
}
