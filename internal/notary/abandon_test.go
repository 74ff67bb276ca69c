package notary_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/testbed"
)

// TestAbandonedProbesLeaveTheQueue: probes queued by requests that have all
// gone (here: timed out) are dropped before they start, so the next
// legitimate check gets the slot as soon as it is free instead of waiting
// behind probes nobody will read. On the old code the queued probes of a
// silent target each held the only slot for the probe timeout (a minute)
// after their requests had ended, and the legitimate check timed out.
func TestAbandonedProbesLeaveTheQueue(t *testing.T) {
	base := newWorld(t, notary.Config{})
	held, err := testbed.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	silent, err := testbed.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// One slot; requests give up after 2 s; probes of a silent target
	// last the minute the prober allows.
	w, _ := handNotary(t, base.path, "", time.Minute, notary.Config{MaxProbes: 1, MaxQueue: 4, RequestTimeout: 2 * time.Second})
	w.path.Set("held.test", held.Addr)
	for i := 0; i < 3; i++ {
		w.path.Set(fmt.Sprintf("gone%d.test", i), silent.Addr)
	}
	w.path.Set("legit.test", base.site.Addr)
	fp := "fingerprint=" + sha1Colon([]byte("x"))

	var wg sync.WaitGroup
	send := func(name string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := postFrom(w, "/target/"+name+"+443", "application/x-www-form-urlencoded", fp)()
			if code != http.StatusServiceUnavailable {
				t.Errorf("%s: %d %s, want 503 (timed out)", name, code, body)
			}
		}()
	}
	send("held.test")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(metricsText(t, w), "pkie_notary_probes_in_flight 1\n") {
		if time.Now().After(deadline) {
			t.Fatal("the held probe never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		send(fmt.Sprintf("gone%d.test", i)) // queued behind held.test
	}
	wg.Wait() // every request has timed out and gone
	held.Close()
	if code, body := postFrom(w, "/target/legit.test+443", "application/x-www-form-urlencoded", "fingerprint="+sha1Colon(base.site.Leaf().Cert.Raw))(); code != http.StatusOK {
		t.Fatalf("legitimate check after the abandoned ones: %d %s", code, body)
	}
	if m := metricsText(t, w); !strings.Contains(m, "pkie_notary_probes_abandoned_total 3\n") {
		t.Errorf("abandoned probes: %q, want 3", grepMetric(m, "pkie_notary_probes_abandoned_total"))
	}
}
