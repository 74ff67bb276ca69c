package replay

import (
	"testing"
	"time"
)

// TestZeekReal reads conn.log and ssl.log of tls-lo.pcap written to Zeek's
// published field lists (Zeek 7.1 to 8.x; testdata/make-zeek-fixtures.py
// says how they were made) as TSV, as JSON with ts in epoch seconds, and as
// JSON with ISO 8601 ts or milliseconds, and checks them flow for flow against the pcap
// reader's view of the same capture.
func TestZeekReal(t *testing.T) {
	direct := drainFlows(t, openFixture(t, "tls-lo.pcap", FormatPCAP, Options{}))
	for _, enc := range []struct {
		conn, ssl string
		prec      time.Duration // of ts
	}{
		{"zeek-tls-conn.log", "zeek-tls-ssl.log", time.Microsecond},
		{"zeek-tls-conn.json", "zeek-tls-ssl.json", time.Microsecond},
		{"zeek-tls-conn-iso8601.json", "zeek-tls-ssl-iso8601.json", time.Microsecond},
		{"zeek-tls-conn-millis.json", "zeek-tls-ssl.json", time.Millisecond},
		// A TSV conn.log named by a JSON ssl.log: each is sniffed alone.
		{"zeek-tls-conn.log", "zeek-tls-ssl-iso8601.json", time.Microsecond},
	} {
		t.Run(enc.conn+"+"+enc.ssl, func(t *testing.T) {
			r := openFixture(t, enc.conn, FormatAuto, Options{ZeekSSL: openSSL(t, enc.ssl)})
			flows := drainFlows(t, r)
			st := r.Stats()
			if st.Read != 6 || st.Kept != 5 || st.Named != 4 || st.SNIEntries != 4 || st.Malformed != 0 {
				t.Fatalf("stats %+v, want 6 read, 5 kept, 4 named, 4 ssl.log names", st)
			}
			for i, f := range flows {
				w := realCapture[i]
				d := direct[i]
				if f.ServerName != w.sni || f.PacketsOut != w.pktOut || f.PacketsIn != w.pktIn ||
					f.BytesOut != w.bytesOut || f.BytesIn != w.bytesIn {
					t.Errorf("flow %d: %+v, want %+v", i, f, w)
				}
				// Zeek's ts is the first packet's, to the microsecond of
				// the capture; its duration ends at the last FIN, before
				// the final ACK the pcap reader counts.
				if f.Client != d.Client || f.Server != d.Server || f.Port != d.Port || !f.Start.Equal(d.Start.Truncate(enc.prec)) ||
					f.Duration <= 0 || f.Duration > d.Duration || d.Duration-f.Duration > time.Millisecond {
					t.Errorf("flow %d: %+v\n  the pcap reader's: %+v", i, f, d)
				}
			}
			// Port 9's rejected connection: Zeek leaves its duration and
			// payload bytes unset but counts its packets.
			flows = drainFlows(t, openFixture(t, enc.conn, FormatZeek, Options{Ports: []uint16{443, 9}}))
			if len(flows) != 6 {
				t.Fatalf("ports 443 and 9: %d flows, want 6", len(flows))
			}
			if f := flows[5]; f.Port != 9 || f.Duration != 0 || f.PacketsOut != 1 || f.BytesOut != 60 || f.PacketsIn != 1 || f.BytesIn != 40 {
				t.Errorf("port 9 flow %+v", f)
			}
		})
	}
}
