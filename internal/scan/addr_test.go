package scan

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// TestFailedRecordNamesTheAddressTried: a site that cannot be reached is
// recorded with the address and port the probe dialled, not "" and the
// port asked for.
func TestFailedRecordNamesTheAddressTried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close() // nothing listens there any more
	r := testbed.NewResolver()
	r.Set("down.test", closed)
	var out bytes.Buffer
	o := Options{Probe: probe.Options{Lookup: r.Lookup, AllowPrivate: true, Timeout: 2 * time.Second}, Retries: -1}
	if _, err := Run(context.Background(), NewListReader(bytes.NewReader([]byte("1,down.test\n"))), &out, o); err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &rec); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rec.OK() || rec.IP != "127.0.0.1" || rec.Port != int(closed.Port()) {
		t.Fatalf("record %+v, want a failure at %s", rec, closed)
	}
}
