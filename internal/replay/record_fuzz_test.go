package replay

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// Schedules and run records are files a user hands pkie replay run and
// pkie replay report; they may come from elsewhere, so their readers get
// fuzzed like the trace readers.

const fuzzSchedule = `{"type":"header","version":1,"source":"test","start":"2013-04-21T12:00:00Z","naming":["sni"],"cache_lifetime_ns":0}
{"type":"request","t_ns":0,"client":"10.0.0.1","host":"a.example","port":443}
{"type":"request","t_ns":1000000000,"client":"10.0.0.2","host":"b.example","port":443}
{"type":"target","host":"a.example","port":443,"flows":3,"requests":1}
{"type":"target","host":"b.example","port":443,"flows":1,"requests":1,"dead":true}
{"type":"summary","trace":{},"flows":4,"named_sni":4,"named_map":0,"named_rdns":0,"unnamed":0,"sni_recovered":-1,"client_cache_hits":2,"requests":2,"targets":2,"dead_targets":1,"https_bytes":1000,"seconds":[{"flows":3,"named":3,"client_hits":2,"requests":1,"https_bytes":600},{"flows":1,"named":1,"client_hits":0,"requests":1,"https_bytes":400}]}
`

const fuzzRecord = `{"type":"run","version":1,"schedule":"s.jsonl","schedule_header":{"type":"header","version":1,"source":"test","start":"2013-04-21T12:00:00Z","naming":null,"cache_lifetime_ns":0},"api":"convergence","notaries":["local"],"speedup":1,"timeout_ns":10000000000,"started":"2026-01-01T00:00:00Z"}
{"type":"result","seq":0,"t_ns":0,"sent_ns":1000,"latency_ns":5000000,"client":"127.0.1.1","host":"a.example","port":443,"notary":0,"outcome":"ok","status":200,"cache":"miss"}
{"type":"net","wall_ns":1000000000,"notary_bytes":5000,"probe_bytes":3000,"where":"listener"}
{"type":"result","seq":1,"t_ns":1000000000,"sent_ns":1000001000,"latency_ns":2000000000,"client":"127.0.1.2","host":"b.example","port":443,"notary":0,"outcome":"unavailable","status":503,"error":"target unreachable"}
{"type":"end","reached_ns":2000000000,"wall_ns":2000000000,"max_lag_ns":1000,"peak_in_flight":1}
`

func FuzzScheduleReader(f *testing.F) {
	f.Add([]byte(fuzzSchedule))
	f.Add([]byte(fuzzSchedule[:len(fuzzSchedule)/2]))
	f.Add([]byte(`{"type":"header","version":1}` + "\n" + `{"type":"summary","seconds":null}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sr, err := NewScheduleReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		if sr.Header.Version != ScheduleVersion {
			t.Fatalf("accepted version %d", sr.Header.Version)
		}
		var last int64 = -1 << 62
		n := 0
		for {
			r, err := sr.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && err.Error() == "" {
					t.Fatal("empty error")
				}
				break
			}
			n++
			if int64(r.T) < last || r.Host == "" || r.Port == 0 {
				t.Fatalf("request %+v escaped validation (previous at %d)", r, last)
			}
			last = int64(r.T)
			if n > len(b) {
				t.Fatal("reader does not stop")
			}
		}
		targets, sum, err := sr.Rest()
		if err == nil && sum == nil {
			t.Fatalf("Rest returned %d targets and no summary without an error", len(targets))
		}
	})
}

func FuzzReadRecord(f *testing.F) {
	f.Add([]byte(fuzzRecord))
	f.Add([]byte(fuzzRecord[:len(fuzzRecord)-20]))
	f.Add([]byte(`{"type":"run","version":1}` + "\n" + `{"type":"end"}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var results []Result
		var nets []NetSample
		h, end, err := ReadRecord(bytes.NewReader(b),
			func(r Result) error { results = append(results, r); return nil },
			func(s NetSample) error { nets = append(nets, s); return nil })
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if h == nil || h.Version != RecordVersion {
			t.Fatalf("accepted header %+v", h)
		}
		// What was read writes back and reads again the same.
		var buf bytes.Buffer
		rw, err := NewRecordWriter(&buf, *h)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if err := rw.WriteResult(r); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range nets {
			if err := rw.WriteNet(s); err != nil {
				t.Fatal(err)
			}
		}
		if end != nil {
			if err := rw.WriteEnd(*end); err != nil {
				t.Fatal(err)
			}
		} else if err := rw.Flush(); err != nil {
			t.Fatal(err)
		}
		var again []Result
		h2, end2, err := ReadRecord(bytes.NewReader(buf.Bytes()), func(r Result) error { again = append(again, r); return nil }, nil)
		if err != nil {
			t.Fatalf("re-reading what was read: %v", err)
		}
		if (end == nil) != (end2 == nil) || len(again) != len(results) || h2.Speedup != h.Speedup {
			t.Fatalf("round trip changed the record: end %v/%v, %d/%d results", end, end2, len(results), len(again))
		}
		for i := range again {
			if !reflect.DeepEqual(again[i], results[i]) {
				t.Fatalf("result %d: %+v became %+v", i, results[i], again[i])
			}
		}
	})
}
