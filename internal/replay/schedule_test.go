package replay

import (
	"bytes"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestScheduleRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	start := time.Date(2013, 4, 21, 12, 0, 0, 0, time.UTC)
	sw, err := NewScheduleWriter(&buf, ScheduleHeader{Source: "test", Start: start, Naming: []string{"sni"}})
	if err != nil {
		t.Fatal(err)
	}
	c := netip.MustParseAddr("10.0.0.1")
	for i, h := range []string{"a.example", "b.example", "a.example"} {
		if err := sw.WriteRequest(Request{T: time.Duration(i) * time.Second, Client: c, Host: h, Port: 443}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.WriteRequest(Request{T: 0, Client: c, Host: "late.example", Port: 443}); err == nil {
		t.Fatal("a request out of time order was written")
	}
	sw.WriteTarget(Target{Host: "a.example", Port: 443, Flows: 5, Requests: 2})
	sw.WriteTarget(Target{Host: "b.example", Port: 443, Flows: 1, Requests: 1, Dead: true})
	if err := sw.WriteRequest(Request{T: 5 * time.Second, Host: "x", Port: 443}); err == nil {
		t.Fatal("a request after the targets was written")
	}
	if err := sw.WriteSummary(ScheduleSummary{Requests: 3, Seconds: []Second{{Requests: 1}, {Requests: 1}, {Requests: 1}}}); err != nil {
		t.Fatal(err)
	}

	sr, err := NewScheduleReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !sr.Header.Start.Equal(start) || sr.Header.Source != "test" {
		t.Fatalf("header %+v", sr.Header)
	}
	var hosts []string
	for {
		r, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, r.Host)
	}
	if strings.Join(hosts, ",") != "a.example,b.example,a.example" {
		t.Fatalf("requests %v", hosts)
	}
	targets, sum, err := sr.Rest()
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 2 || !targets[1].Dead || sum.Requests != 3 || len(sum.Seconds) != 3 {
		t.Fatalf("targets %+v summary %+v", targets, sum)
	}

	// Rest without reading the requests skips them.
	sr, _ = NewScheduleReader(bytes.NewReader(buf.Bytes()))
	if targets, _, err := sr.Rest(); err != nil || len(targets) != 2 {
		t.Fatalf("Rest first: %v %v", targets, err)
	}

	lines := strings.SplitAfter(buf.String(), "\n")
	cut := strings.Join(lines[:len(lines)-2], "")
	sr, _ = NewScheduleReader(strings.NewReader(cut))
	if _, _, err := sr.Rest(); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("schedule without summary: %v", err)
	}
	for _, bad := range []string{
		"",
		`{"type":"request","t_ns":0,"host":"a","port":443}` + "\n",
		`{"type":"header","version":9}` + "\n",
	} {
		if _, err := NewScheduleReader(strings.NewReader(bad)); err == nil {
			t.Errorf("schedule %q accepted", bad)
		}
	}
	unordered := lines[0] + `{"type":"request","t_ns":5,"host":"a","port":443}` + "\n" + `{"type":"request","t_ns":4,"host":"a","port":443}` + "\n"
	sr, _ = NewScheduleReader(strings.NewReader(unordered))
	sr.Next()
	if _, err := sr.Next(); err == nil || !strings.Contains(err.Error(), "time order") {
		t.Fatalf("unordered requests: %v", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	rw, err := NewRecordWriter(&buf, RunHeader{API: "convergence", Notaries: []string{"n0"}, Speedup: 10})
	if err != nil {
		t.Fatal(err)
	}
	rw.WriteResult(Result{Seq: 0, Host: "a.example", Port: 443, Outcome: OutcomeOK, Status: 200, Cache: CacheMiss})
	rw.WriteNet(NetSample{Wall: time.Second, NotaryBytes: 100, NotaryBytesEach: []int64{100}, Where: "listener"})
	rw.WriteResult(Result{Seq: 1, Host: "b.example", Port: 443, Outcome: OutcomeTimeout})
	rw.Flush()
	killed := buf.String()
	rw.WriteEnd(RunEnd{Reached: time.Minute})

	var n, nets int
	var each []int64
	h, end, err := ReadRecord(bytes.NewReader(buf.Bytes()), func(Result) error { n++; return nil }, func(s NetSample) error { nets++; each = s.NotaryBytesEach; return nil })
	if err != nil || h.Speedup != 10 || end == nil || end.Reached != time.Minute || n != 2 || nets != 1 || len(each) != 1 || each[0] != 100 {
		t.Fatalf("read: %+v %+v %d %d %v", h, end, n, nets, err)
	}
	// A killed run: no end, and a last line cut short, still reads.
	n = 0
	h, end, err = ReadRecord(strings.NewReader(killed+`{"type":"res`), func(Result) error { n++; return nil }, nil)
	if err != nil || end != nil || n != 2 || h == nil {
		t.Fatalf("killed record: %v %v %d", end, err, n)
	}
	// A malformed line anywhere else is an error.
	if _, _, err := ReadRecord(strings.NewReader(killed+"{bad\n"+`{"type":"end"}`+"\n"), nil, nil); err == nil {
		t.Fatal("malformed middle line accepted")
	}
	// Per-notary bytes must match the header's notaries.
	if _, _, err := ReadRecord(strings.NewReader(killed+`{"type":"net","wall_ns":1,"notary_bytes":3,"notary_bytes_each":[1,2]}`+"\n"), nil, nil); err == nil || !strings.Contains(err.Error(), "2 notaries") {
		t.Fatalf("net sample with bytes of 2 notaries, header 1: %v", err)
	}
	if _, _, err := ReadRecord(strings.NewReader(`{"type":"result"}`+"\n"), nil, nil); err == nil {
		t.Fatal("record without a run header accepted")
	}
}
