package replay

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// drain reads r to its end and checks the invariants every reader keeps:
// what it returns is kept and counted, and reading stops.
func drain(t *testing.T, r Reader) {
	var n int64
	for {
		f, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && err.Error() == "" {
				t.Fatal("empty error")
			}
			break
		}
		n++
		if f.Start.IsZero() || !f.Server.IsValid() || f.Duration < 0 {
			t.Fatalf("flow %+v escaped validation", f)
		}
		if n > 1<<20 {
			t.Fatal("reader does not stop")
		}
	}
	st := r.Stats()
	if st.Kept != n || st.Named > st.Kept || st.Kept > st.Read {
		t.Fatalf("returned %d flows, stats %+v", n, st)
	}
}

func seed(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzJSONL(f *testing.F) {
	f.Add([]byte(`{"start":"2014-03-01T10:00:00Z","duration_ns":5,"client":"10.0.0.1","server":"::1","port":443,"sni":"a.example"}` + "\n"))
	f.Add([]byte("{}\n{\"start\":1}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		drain(t, NewJSONLReader(bytes.NewReader(b)))
	})
}

func FuzzNfdump(f *testing.F) {
	seed(f, "nfdump-1.6.csv", "nfdump-1.7-csv-fast.csv", "nfdump-1.7.1.csv", "nfdump-1.7.1-q.csv", "nfdump-1.7.1-B.csv")
	f.Fuzz(func(t *testing.T, b []byte) {
		drain(t, NewNfdumpReader(bytes.NewReader(b), Options{Ports: []uint16{443, 8443}}))
	})
}

func fuzzZeek(f *testing.F, conn, ssl string, more ...string) {
	b, err := os.ReadFile(filepath.Join("testdata", ssl))
	if err != nil {
		f.Fatal(err)
	}
	seed(f, append([]string{conn}, more...)...)
	f.Fuzz(func(t *testing.T, c []byte) {
		// The fuzzed bytes are read both as the conn.log and as the ssl.log.
		for _, o := range []Options{
			{ZeekSSL: bytes.NewReader(b), Ports: []uint16{443, 8443}},
			{ZeekSSL: bytes.NewReader(c), MaxSNI: 2},
		} {
			in := c
			if o.MaxSNI == 2 {
				in, _ = os.ReadFile(filepath.Join("testdata", conn))
			}
			r, err := NewZeekReader(bytes.NewReader(in), o)
			if err != nil {
				continue
			}
			drain(t, r)
			if st := r.Stats(); st.SNIEntries > 2 && o.MaxSNI == 2 {
				t.Fatalf("map past its bound: %+v", st)
			}
		}
	})
}

func FuzzZeekTSV(f *testing.F) {
	fuzzZeek(f, "conn.log", "ssl.log", "zeek-tls-conn.log", "zeek-tls-ssl.log")
}

func FuzzZeekJSON(f *testing.F) {
	fuzzZeek(f, "conn.json", "ssl.json", "zeek-tls-conn.json", "zeek-tls-ssl-iso8601.json", "zeek-tls-conn-millis.json")
}
