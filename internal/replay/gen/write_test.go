package gen

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// TestWriteReadBack writes a trace in every format and reads it back
// through replay.Open, sniffing the format as pkie replay flows would: the
// flows must come back as made, but for what the format cannot carry.
func TestWriteReadBack(t *testing.T) {
	o := small()
	o.Flows = 3000
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	want := drain(t, g)
	for _, tc := range []struct {
		format string
		// fix turns a flow into what the format keeps of it.
		fix func(f replay.Flow) replay.Flow
	}{
		{replay.FormatJSONL, func(f replay.Flow) replay.Flow { return f }},
		// nfdump prints the start to the second and has no server name.
		{replay.FormatNfdump, func(f replay.Flow) replay.Flow {
			f.Start = f.Start.Truncate(time.Second)
			f.ServerName = ""
			return f
		}},
		// An unanswered connection has no handshake, so no ssl.log line.
		{replay.FormatZeek, func(f replay.Flow) replay.Flow {
			if f.PacketsIn == 0 {
				f.ServerName = ""
			}
			return f
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			var trace, ssl bytes.Buffer
			w, err := NewWriter(tc.format, &trace, &ssl)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range want {
				if err := w.Write(f); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			opt := replay.Options{}
			if tc.format == replay.FormatZeek {
				opt.ZeekSSL = &ssl
			}
			r, err := replay.Open(&trace, replay.FormatAuto, opt)
			if err != nil {
				t.Fatal(err)
			}
			i := 0
			for ; ; i++ {
				got, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if i >= len(want) {
					t.Fatalf("more flows read than written: %+v", got)
				}
				// The readers turn seconds into a Duration by a float
				// product, which may fall a nanosecond short.
				got.Duration = got.Duration.Round(time.Millisecond)
				if w := tc.fix(want[i]); got != w {
					t.Fatalf("flow %d:\nread  %+v\nwrote %+v", i, got, w)
				}
			}
			st := r.Stats()
			if i != len(want) || st.Malformed != 0 {
				t.Fatalf("read %d flows of %d, stats %+v", i, len(want), st)
			}
		})
	}
}

// TestNfdumpLayout checks a line against the layout nfdump 1.7.1 prints
// (TZ=UTC nfdump -b -o csv of a flow nfpcapd made from a pcap).
func TestNfdumpLayout(t *testing.T) {
	var b bytes.Buffer
	w, _ := NewWriter(replay.FormatNfdump, &b, nil)
	f := replay.Flow{
		Start: time.Date(2013, 4, 21, 17, 0, 0, 123e6, time.UTC), Duration: 2520 * time.Millisecond,
		Client: mustAddr("10.0.0.1"), Server: mustAddr("198.18.0.5"), Port: 443,
		PacketsOut: 6, BytesOut: 540, PacketsIn: 4, BytesIn: 2960,
	}
	if err := w.Write(f); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	real := "2013-04-21 17:00:00,2013-04-21 17:00:02,2.520,10.0.0.1,198.18.0.5,50000,443,TCP,...AP.SF,0,0,6,540,4,2960,0,0,0,0,0,0,0,0,0.0.0.0,0.0.0.0,0,0,00:00:00:00:00:00,00:00:00:00:00:00,00:00:00:00:00:00,00:00:00:00:00:00,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,    0.000,    0.000,    0.000,0.0.0.0,17/1,0,2026-11-23 12:08:01.218"
	if lines[0] != nfdumpHeader {
		t.Errorf("header %q", lines[0])
	}
	// The client port, the exporter's engine and the time received are
	// the generator's own; every other column is as nfdump prints it.
	gf, rf := strings.Split(lines[1], ","), strings.Split(real, ",")
	if len(gf) != len(rf) {
		t.Fatalf("%d columns, nfdump prints %d", len(gf), len(rf))
	}
	for i := range rf {
		switch i {
		case 5, 45, 47:
			continue
		}
		if gf[i] != rf[i] {
			t.Errorf("column %d: %q, nfdump prints %q", i, gf[i], rf[i])
		}
	}
	if got := strings.Join(lines[2:], "\n"); got != "Summary\nflows,bytes,packets,avg_bps,avg_pps,avg_bpp\n1,3500,10,11111,3,350\n" {
		t.Errorf("summary %q", got)
	}
}
