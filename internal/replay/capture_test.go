package replay

import (
	"testing"
	"time"
)

// realCapture is what testdata/make-pcap-fixtures.sh captured: curl asking
// OpenSSL's s_server on port 443 of the loopback addresses, once each for
// a.example, b.example and c.example on 127.0.0.1, once by address (no
// SNI), once for v6.example on ::1, then a connection refused on port 9.
// Byte counts are IP bytes (headers included), packet counts every
// segment; both were checked against tshark's ip.len (ipv6.plen + 40) per
// stream and direction, and are nfdump's too.
var realCapture = []struct {
	sni               string
	v6                bool
	pktOut, pktIn     uint64
	bytesOut, bytesIn uint64
}{
	{"a.example", false, 11, 8, 1296, 6961},
	{"b.example", false, 9, 9, 1192, 7013},
	{"c.example", false, 9, 9, 1192, 7012},
	{"", false, 11, 8, 1296, 6959},
	{"v6.example", true, 9, 9, 1373, 7193},
}

// TestRealCaptures reads the captures tcpdump and dumpcap made of real TLS
// connections on Linux's loopback: Ethernet frames (lo), Linux cooked
// frames (the "any" interface) and pcapng.
func TestRealCaptures(t *testing.T) {
	for _, file := range []string{"tls-lo.pcap", "tls-sll.pcap", "tls-lo.pcapng"} {
		t.Run(file, func(t *testing.T) {
			r := openFixture(t, file, FormatAuto, Options{})
			flows := drainFlows(t, r)
			if len(flows) != len(realCapture) {
				t.Fatalf("%d flows, want %d: %+v", len(flows), len(realCapture), flows)
			}
			lo4, lo6 := addr("127.0.0.1"), addr("::1")
			for i, w := range realCapture {
				f := flows[i]
				lo := lo4
				if w.v6 {
					lo = lo6
				}
				if f.ServerName != w.sni || f.Client != lo || f.Server != lo || f.Port != 443 ||
					f.PacketsOut != w.pktOut || f.PacketsIn != w.pktIn || f.BytesOut != w.bytesOut || f.BytesIn != w.bytesIn {
					t.Errorf("flow %d: %+v, want %+v", i, f, w)
				}
				// Each connection took a few milliseconds; the script
				// started them 200 ms apart.
				if f.Duration <= 0 || f.Duration > 200*time.Millisecond {
					t.Errorf("flow %d lasted %v", i, f.Duration)
				}
				if i > 0 && f.Start.Sub(flows[i-1].Start) < 200*time.Millisecond {
					t.Errorf("flow %d started %v after the one before", i, f.Start.Sub(flows[i-1].Start))
				}
			}
			st := r.Stats()
			if st.Kept != 5 || st.Named != 4 || st.Malformed != 0 || st.Evicted != 0 || st.Packets != 94 {
				t.Errorf("stats %+v, want 5 kept, 4 named, 94 packets", st)
			}
			// Port 9's refused connection: the SYN (60 bytes with its
			// options) and the RST back.
			flows = drainFlows(t, openFixture(t, file, FormatPCAP, Options{Ports: []uint16{9}}))
			if len(flows) != 1 || flows[0].Port != 9 || flows[0].PacketsOut != 1 || flows[0].PacketsIn != 1 ||
				flows[0].BytesOut != 60 || flows[0].BytesIn != 40 || flows[0].ServerName != "" {
				t.Errorf("port 9: %+v, want one refused connection", flows)
			}
		})
	}
}
