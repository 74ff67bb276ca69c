package verifybench

import (
	"testing"
	"time"
)

// TestCompare checks the experiment-style summary on a made-up report: the
// fastest counts per criterion and the averages over the sites.
func TestCompare(t *testing.T) {
	ms := time.Millisecond
	method := func(name string, roots, verify, conn time.Duration, parallel *Summary) Method {
		return Method{Backend: name, Phases: Phases{Roots: Summary{N: 1, Mean: roots}, Verify: Summary{N: 1, Mean: verify},
			Parallel: parallel, Total: Summary{N: 1, Mean: roots + verify}}, Connect: &Summary{N: 1, P50: conn}}
	}
	r := &Report{Backends: []BackendInfo{{Name: "a"}, {Name: "b"}}, Sites: []SiteResult{
		// a verifies faster, b connects faster and, with its cheap
		// store, verifies faster in all.
		{Site: "s1", Connect: Summary{N: 1, P50: 40 * ms}, Methods: []Method{method("a", 2*ms, 1*ms, 46*ms, nil), method("b", 1*ms, 1500*time.Microsecond, 44*ms, nil)}},
		// b's parallel phase counts in its verify call: 1+1 > 1.5.
		{Site: "s2", Connect: Summary{N: 1, P50: 40 * ms}, Methods: []Method{method("a", 2*ms, 1500*time.Microsecond, 42*ms, nil), method("b", 1*ms, 1*ms, 44*ms, &Summary{N: 1, Mean: 1 * ms})}},
	}}
	r.compare()
	c := r.Comparison
	want := map[string]map[string]int{"verify": {"a": 2, "b": 0}, "total": {"a": 0, "b": 2}, "connect": {"a": 1, "b": 1}}
	for k, m := range want {
		for n, v := range m {
			if c.Fastest[k][n] != v {
				t.Errorf("fastest %s %s = %d, want %d", k, n, c.Fastest[k][n], v)
			}
		}
	}
	a := c.Backends[0]
	if a.Backend != "a" || a.Sites != 2 || a.Roots != 2*ms || a.Verify != 1250*time.Microsecond || a.Connect != 44*ms || a.OverNone != 4*ms {
		t.Errorf("a: %+v", a)
	}
	if b := c.Backends[1]; b.Verify != 1750*time.Microsecond || b.RootsShare != 1/2.25 {
		t.Errorf("b: %+v (verify want 1.75 ms, roots share %v)", b, 1/2.25)
	}
}
