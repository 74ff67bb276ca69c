package notary

import (
	"fmt"
	"testing"
)

// The signed-answer cache evicts one entry when full, not all: a notary
// with more targets than the bound keeps most answers signed.
func TestSignedCacheEvictsOne(t *testing.T) {
	var c signedCache
	c.init(100)
	for i := range 1050 {
		c.put(fmt.Sprint(i), []byte{byte(i)})
		if len(c.m) > 100 {
			t.Fatalf("%d entries held; the bound is 100", len(c.m))
		}
	}
	if len(c.m) != 100 {
		t.Fatalf("%d entries held after 1050 puts; want the bound, 100 (clearing everything leaves fewer)", len(c.m))
	}
	if _, ok := c.get("1049"); !ok {
		t.Fatal("the newest answer was evicted")
	}
}
