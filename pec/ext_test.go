package pec

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
	utls "github.com/refraction-networking/utls"
)

func sampleExtension() *Extension {
	return &Extension{
		ClientID: ClientID(pecwire.ClientID{1, 2, 3, 4}),
		Nonce:    Nonce(pecwire.Nonce{9, 8, 7, 6, 5, 4, 3, 2}),
		Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Revocation}, {ID: pkie.Notary, Params: []byte{1}}},
		Cloud:    Addr{Transport: pecwire.QUIC, HostPort: "127.0.0.1:4433"},
		Ticket:   Ticket(pecwire.Ticket{Counter: 7, Tag: [pecwire.TicketTagSize]byte{0xa1, 15: 0x5e}}),
	}
}

func TestExtensionRoundTrip(t *testing.T) {
	priv := sampleExtension()
	priv.ClientID, priv.Ticket = ClientID(pecwire.ClientID{}), Ticket(pecwire.Ticket{})
	priv.EphID = bytes.Repeat([]byte{0xEE}, MaxEphID)
	priv.Key, priv.HasKey = [32]byte{1, 2, 3}, true
	priv.Forwarder = Addr{Transport: pecwire.TCP, HostPort: "[::1]:8443"}
	for _, e := range []*Extension{sampleExtension(), priv} {
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseExtension(b)
		if err != nil {
			t.Fatalf("ParseExtension(%x): %v", b, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, e)
		}
	}
	// The size the documentation states: 76 bytes of body for the three
	// built-in enhancements and a 14-byte address.
	b, _ := sampleExtension().Marshal()
	if len(b) != 76 {
		t.Errorf("extension body is %d bytes, docs/formats/pec.md says 76", len(b))
	}
}

func TestParseExtensionRejects(t *testing.T) {
	good, _ := sampleExtension().Marshal()
	field := func(typ byte, v []byte) []byte {
		return append(binary.BigEndian.AppendUint16([]byte{typ}, uint16(len(v))), v...)
	}
	reqs, _ := pkie.MarshalRequests([]pkie.Request{{ID: pkie.CT}})
	cloud := append([]byte{addrTCP}, "127.0.0.1:1"...)
	base := func(fs ...[]byte) []byte {
		b := []byte{ExtensionVersion}
		for _, f := range fs {
			b = append(b, f...)
		}
		return b
	}
	id, nonce := field(fieldClientID, []byte{1, 2, 3, 4}), field(fieldNonce, make([]byte, 8))
	rq, cl := field(fieldRequests, reqs), field(fieldCloud, cloud)
	tk := field(fieldTicket, make([]byte, pecwire.TicketSize))
	if _, err := ParseExtension(base(id, nonce, rq, cl, tk)); err != nil {
		t.Fatalf("minimal extension refused: %v", err)
	}
	if _, err := ParseExtension(base(id, nonce, rq, cl, tk, field(200, []byte("later")))); err != nil {
		t.Fatalf("unknown later field refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"version", append([]byte{2}, good[1:]...), "version 2"},
		{"truncated", good[:len(good)-1], "remain"},
		{"trailing header", append(append([]byte{}, good...), 9), "truncated field header"},
		{"no nonce", base(id, rq, cl, tk), "no nonce"},
		{"no requests", base(id, nonce, cl, tk), "no enhancement"},
		{"no cloud", base(id, nonce, rq, tk), "no cloud"},
		{"no identity", base(nonce, rq, cl, tk), "exactly one"},
		{"both identities", base(id, nonce, rq, cl, field(fieldEphID, []byte{1}), tk), "exactly one"},
		{"no ticket", base(id, nonce, rq, cl), "ticket"},
		{"ticket with an EphID", base(nonce, rq, cl, field(fieldEphID, []byte{1}), tk), "ticket"},
		{"short ticket", base(id, nonce, rq, cl, field(fieldTicket, make([]byte, pecwire.TicketSize-1))), "want 20"},
		{"out of order", base(nonce, id, rq, cl, tk), "increasing order"},
		{"repeated", base(id, nonce, nonce, rq, cl, tk), "increasing order"},
		{"short id", base(field(fieldClientID, []byte{1, 2, 3}), nonce, rq, cl, tk), "want 4"},
		{"long nonce", base(id, field(fieldNonce, make([]byte, 9)), rq, cl, tk), "want 8"},
		{"bad requests", base(id, nonce, field(fieldRequests, []byte{0, 1, 0}), cl, tk), "truncated request"},
		{"duplicate request", base(id, nonce, field(fieldRequests, append(reqs, reqs...)), cl, tk), "twice"},
		{"bad transport", base(id, nonce, rq, field(fieldCloud, append([]byte{3}, "a:1"...)), tk), "transport"},
		{"no port", base(id, nonce, rq, field(fieldCloud, append([]byte{addrQUIC}, "host"...)), tk), "host:port"},
		{"port 0", base(id, nonce, rq, field(fieldCloud, append([]byte{addrQUIC}, "h:0"...)), tk), "port"},
		{"control byte", base(id, nonce, rq, field(fieldCloud, append([]byte{addrQUIC}, "h\x00:1"...)), tk), "byte 0x00"},
		{"long ephid", base(nonce, rq, cl, field(fieldEphID, make([]byte, MaxEphID+1))), "want 1-64"},
		{"short key", base(id, nonce, rq, cl, field(fieldKey, make([]byte, 31)), tk), "want 32"},
		{"oversize", make([]byte, MaxExtension+1), "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseExtension(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseExtension = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// recordedHello returns the first flight crypto/tls sends with cfg.
func recordedHello(t testing.TB, cfg *tls.Config) []byte {
	c1, c2 := net.Pipe()
	defer c1.Close()
	go func() {
		tls.Client(c2, cfg).Handshake()
		c2.Close()
	}()
	c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	raw, _, err := readClientHello(c1, MaxClientHello)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestReadClientHello(t *testing.T) {
	raw := recordedHello(t, &tls.Config{ServerName: "Bank.Test"})
	got, h, err := readClientHello(bytes.NewReader(raw), MaxClientHello)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, raw) || h.ServerName != "bank.test" || h.HasPEC {
		t.Fatalf("read %d of %d bytes, name %q, PEC %v", len(got), len(raw), h.ServerName, h.HasPEC)
	}
	// The same ClientHello split over records of 100 bytes each.
	msg := raw[recordHeader:]
	var split []byte
	for len(msg) > 0 {
		n := min(100, len(msg))
		split = append(split, recordHandshake, 3, 1, 0, byte(n))
		split = append(split, msg[:n]...)
		msg = msg[n:]
	}
	got, h, err = readClientHello(bytes.NewReader(split), MaxClientHello)
	if err != nil || !bytes.Equal(got, split) || h.ServerName != "bank.test" {
		t.Fatalf("fragmented: %v, name %q", err, h.ServerName)
	}
	// Bounds and garbage: every refusal keeps what was read for replay.
	for _, tc := range []struct {
		name  string
		in    []byte
		limit int
		want  error
	}{
		{"http", []byte("GET / HTTP/1.1\r\n\r\n"), MaxClientHello, errNotTLS},
		{"too big", raw, 64, nil},
		{"truncated", raw[:len(raw)-3], MaxClientHello, nil},
	} {
		got, _, err := readClientHello(bytes.NewReader(tc.in), tc.limit)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if !bytes.HasPrefix(tc.in, got) || len(got) == 0 {
			t.Errorf("%s: read %x, not a prefix of the input", tc.name, got)
		}
	}
}

func FuzzParseExtension(f *testing.F) {
	b, _ := sampleExtension().Marshal()
	f.Add(b)
	e := sampleExtension()
	e.ClientID, e.Ticket, e.EphID, e.HasKey = ClientID(pecwire.ClientID{}), Ticket(pecwire.Ticket{}), []byte{1, 2}, true
	e.Forwarder = Addr{Transport: pecwire.TCP, HostPort: "fw.example:443"}
	b, _ = e.Marshal()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseExtension(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to something that parses the same.
		out, err := e.Marshal()
		if err != nil {
			t.Fatalf("parsed extension does not marshal: %v", err)
		}
		e2, err := ParseExtension(out)
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-encoded extension differs: %v", err)
		}
		if len(out) > len(b) {
			t.Fatalf("re-encoding grew from %d to %d bytes", len(b), len(out))
		}
	})
}

func FuzzReadClientHello(f *testing.F) {
	f.Add(recordedHello(f, &tls.Config{ServerName: "a.test"}))
	f.Add(recordedHello(f, &tls.Config{ServerName: "a.test", MaxVersion: tls.VersionTLS12}))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, h, err := readClientHello(bytes.NewReader(b), MaxClientHello)
		if !bytes.HasPrefix(b, raw) {
			t.Fatalf("reader returned bytes it was not given")
		}
		if err == nil && h == nil {
			t.Fatal("no error and no ClientHello")
		}
		if err == nil && h.HasPEC {
			ParseExtension(h.PEC)
		}
	})
}

// uHello returns the first flight of the client-server Dialer's uTLS
// ClientHello carrying body (nil: no extension).
func uHello(t testing.TB, body []byte) []byte {
	c1, c2 := net.Pipe()
	defer c1.Close()
	go func() {
		uc := utls.UClient(c2, &utls.Config{ServerName: "www.example.com", InsecureSkipVerify: true, OmitEmptyPsk: true}, utls.HelloCustom)
		if err := uc.ApplyPreset(goLikeSpec(body, &tls.Config{})); err == nil {
			uc.Handshake()
		}
		c2.Close()
	}()
	c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	raw, h, err := readClientHello(c1, MaxClientHello)
	if err != nil {
		t.Fatal(err)
	}
	if h.HasPEC != (body != nil) || (body != nil && !bytes.Equal(h.PEC, body)) {
		t.Fatalf("the ClientHello carries extension %x, want %x", h.PEC, body)
	}
	return raw
}

// TestClientHelloSize measures the ClientHello the client-server Dialer
// sends, as docs/formats/pec.md reports it: the PEC paper's are about
// 400 bytes.
func TestClientHelloSize(t *testing.T) {
	e := sampleExtension()
	e.Cloud = Addr{Transport: pecwire.QUIC, HostPort: "pop1.cloud.example.net:4433"}
	body, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	with, without := uHello(t, body), uHello(t, nil)
	goDefault := recordedHello(t, &tls.Config{ServerName: "www.example.com"})
	t.Logf("PEC extension %d bytes (%d with its header); ClientHello record %d bytes with it, %d without; crypto/tls's default %d",
		len(body), len(body)+4, len(with), len(without), len(goDefault))
	if len(with)-len(without) != len(body)+4 {
		t.Errorf("the extension adds %d bytes to the ClientHello, want %d", len(with)-len(without), len(body)+4)
	}
	if len(with) > 512 {
		t.Errorf("ClientHello of %d bytes with the extension; the paper's are about 400", len(with))
	}
}
