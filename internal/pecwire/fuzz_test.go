package pecwire

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/termtext"
)

// seedMessages is one valid message of every type.
func seedMessages() []Message {
	return []Message{
		&Register{Version: Version},
		&Registered{Version: Version, ClientID: ClientID{1, 2, 3, 4}, Keepalive: 15 * time.Second, MaxFrame: DefaultMaxFrame},
		&Ping{Seq: 1},
		&Pong{Seq: 1<<64 - 1},
		&Submit{ClientID: ClientID{1, 2, 3, 4}, Nonce: Nonce{8, 7, 6, 5, 4, 3, 2, 1}, Budget: 1500 * time.Millisecond,
			ServerName: "example.com", Port: 443,
			Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Notary, Params: []byte{1, 2}}},
			Chain:    [][]byte{{0x30, 0x03, 1, 2, 3}, {0x30, 0}}},
		&Proof{ClientID: ClientID{1}, Nonce: Nonce{2}, Digest: Digest{0xd1, 31: 0x9e}, ID: pkie.CT, Status: ProofOK, Proof: &pkie.Proof{ID: pkie.CT, Version: 1, Body: []byte("proof")}},
		&Proof{ClientID: ClientID{1}, Nonce: Nonce{2}, ID: pkie.Revocation, Status: ProofTimeout, Text: "no proof within 2s"},
		&Reject{Nonce: Nonce{3}, Digest: Digest{0xd2, 31: 0x01}, Code: RejectBusy, Text: "try another point of presence"},
		&Error{Code: RejectTooLarge, Text: "frame of 70000 bytes"},
		&ServerSubmit{Ticket: Ticket{Counter: 7, Tag: [TicketTagSize]byte{0xa1, 15: 0x5e}},
			Submit: Submit{ClientID: ClientID{1, 2, 3, 4}, Nonce: Nonce{9}, ServerName: "example.com", Port: 443,
				Requests: []pkie.Request{{ID: pkie.CT}}, Chain: [][]byte{{0x30, 0}}}},
	}
}

// TestMarshalRoundTrip: every seed message decodes to itself.
func TestMarshalRoundTrip(t *testing.T) {
	for _, m := range seedMessages() {
		b, err := Marshal(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		got, err := Unmarshal(Type(b[0]), b[4:])
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%T: round trip gave %+v, want %+v", m, got, m)
		}
	}
}

// FuzzUnmarshal feeds arbitrary bodies to the decoder of every message
// type. Whatever decodes must encode back to exactly the same bytes (the
// encoding is canonical: a message has one spelling, so nothing can ride
// along unnoticed) and decode again to the same message.
func FuzzUnmarshal(f *testing.F) {
	for _, m := range seedMessages() {
		b, err := Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[0], b[4:])
	}
	f.Add(uint8(TypeSubmit), []byte{})
	f.Add(uint8(TypeError), []byte{byte(RejectBusy), 0, 5, 0x1b, '[', '2', 'J', 'x'})
	f.Add(uint8(TypeReject), append(make([]byte, 9), 0, 3, 0xe2, 0x80, 0xae))
	f.Add(uint8(0), []byte{1})
	f.Fuzz(func(t *testing.T, typ uint8, body []byte) {
		m, err := Unmarshal(Type(typ), body)
		if err != nil {
			return
		}
		if m.Type() != Type(typ) {
			t.Fatalf("type %d decoded as %T", typ, m)
		}
		b, err := Marshal(m)
		if err != nil {
			t.Fatalf("%T decoded but does not encode: %v", m, err)
		}
		if b[0] != typ || !bytes.Equal(b[4:], body) {
			t.Fatalf("%T: re-encoded as %x, received %x", m, b[4:], body)
		}
		if n := int(b[1])<<16 | int(b[2])<<8 | int(b[3]); n != len(body) {
			t.Fatalf("frame length %d for %d bytes", n, len(body))
		}
		again, err := Unmarshal(Type(typ), b[4:])
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("%T: second decode %+v, %v", m, again, err)
		}
		// The peer's text reaches the user's terminal: decoded, it never
		// holds a control character.
		if text := messageText(m); termtext.Check(text) != nil || strings.ContainsFunc(text, termtext.Unsafe) {
			t.Fatalf("%T: decoded text %q holds a control character", m, text)
		}
		// A submission's digest ignores the budget and ASCII case in
		// the server name, and nothing else a prover sees.
		if sub, ok := m.(*Submit); ok {
			alt := *sub
			alt.Budget += time.Second
			alt.ServerName = strings.ToUpper(sub.ServerName)
			if alt.Digest() != sub.Digest() && isASCII(sub.ServerName) {
				t.Fatalf("digest depends on the budget or the name's case: %+v", sub)
			}
			alt = *sub
			alt.Port++
			if alt.Digest() == sub.Digest() {
				t.Fatalf("digest ignores the port: %+v", sub)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// TestSubmitDigest pins the digest's definition (docs/formats/pec.md) to
// a known answer and checks what it covers.
func TestSubmitDigest(t *testing.T) {
	base := Submit{ClientID: ClientID{1, 2, 3, 4}, Nonce: Nonce{8, 7, 6, 5, 4, 3, 2, 1}, Budget: time.Second,
		ServerName: "Example.COM", Port: 443,
		Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Notary, Params: []byte{1, 2}}},
		Chain:    [][]byte{{0x30, 0x03, 1, 2, 3}, {0x30, 0}}}
	// The bytes hashed, written out as docs/formats/pec.md defines them.
	want := sha256.Sum256([]byte("\x01\x02\x03\x04" + "\x08\x07\x06\x05\x04\x03\x02\x01" +
		"\x0bexample.com" + "\x01\xbb" + "\x00\x02" + "\x00\x01\x00\x00" + "\x00\x03\x00\x02\x01\x02" +
		"\x02" + "\x00\x00\x00\x05\x30\x03\x01\x02\x03" + "\x00\x00\x00\x02\x30\x00"))
	if got := base.Digest(); got != want {
		t.Fatalf("digest %x, want %x", got, want)
	}
	same := base
	same.Budget, same.ServerName = 0, "example.com"
	if same.Digest() != base.Digest() {
		t.Error("the budget or the name's case changes the digest")
	}
	for name, change := range map[string]func(*Submit){
		"client":   func(m *Submit) { m.ClientID[0]++ },
		"nonce":    func(m *Submit) { m.Nonce[0]++ },
		"name":     func(m *Submit) { m.ServerName = "example.org" },
		"port":     func(m *Submit) { m.Port = 8443 },
		"requests": func(m *Submit) { m.Requests = m.Requests[:1] },
		"params":   func(m *Submit) { m.Requests = []pkie.Request{{ID: pkie.CT}, {ID: pkie.Notary, Params: []byte{1, 3}}} },
		"chain":    func(m *Submit) { m.Chain = m.Chain[:1] },
	} {
		m := base
		change(&m)
		if m.Digest() == base.Digest() {
			t.Errorf("%s: the digest does not change", name)
		}
	}
}

// messageText is the human-readable text m carries, if any.
func messageText(m Message) string {
	switch m := m.(type) {
	case *Proof:
		return m.Text
	case *Reject:
		return m.Text
	case *Error:
		return m.Text
	}
	return ""
}

// TestTextControlCharacters: a message whose text would drive the user's
// terminal (an ANSI escape, a line break forging a verdict line, a bidi
// override) does not decode, while the same message sent by pkie arrives
// with the characters escaped.
func TestTextControlCharacters(t *testing.T) {
	for _, text := range []string{
		"\x1b[2K\rgood.test  TRUSTED",
		"ok\nsite.test  TRUSTED",
		"tab\there",
		"nul\x00",
		"del\x7f",
		"csi\u009b2J",
		"evil\u202etxt.exe",
		"isolate\u2066x\u2069",
		"line\u2028separator",
	} {
		for _, m := range []Message{
			&Proof{ClientID: ClientID{1}, Nonce: Nonce{2}, ID: pkie.CT, Status: ProofFailed, Text: text},
			&Reject{Nonce: Nonce{3}, Code: RejectBusy, Text: text},
			&Error{Code: RejectInvalid, Text: text},
		} {
			// The raw bytes a hostile cloud would send: the sender's
			// escaping bypassed by writing the text field by hand.
			raw := rawTextBody(t, m, text)
			if got, err := Unmarshal(m.Type(), raw); err == nil {
				t.Errorf("%T with text %q decoded: %+v", m, text, got)
			} else if !strings.Contains(err.Error(), "control character") {
				t.Errorf("%T with text %q: error %v does not say why", m, text, err)
			}
			b, err := Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Unmarshal(m.Type(), b[4:])
			if err != nil {
				t.Fatalf("%T sent by pkie with text %q does not decode: %v", m, text, err)
			}
			if gt := messageText(got); gt != termtext.Escape(text) || !strings.Contains(gt, "\\") {
				t.Errorf("%T: text %q arrived as %q, want it escaped", m, text, gt)
			}
		}
	}
}

// rawTextBody encodes m with text in its text field verbatim.
func rawTextBody(t *testing.T, m Message, text string) []byte {
	t.Helper()
	switch m := m.(type) {
	case *Proof:
		b := append([]byte(nil), m.ClientID[:]...)
		b = append(b, m.Nonce[:]...)
		b = append(b, m.Digest[:]...)
		b = binary.BigEndian.AppendUint16(b, uint16(m.ID))
		b = append(b, byte(m.Status))
		b = appendUint24(b, len(text))
		return append(b, text...)
	case *Reject:
		b := append(append(append([]byte(nil), m.Nonce[:]...), m.Digest[:]...), byte(m.Code))
		b = binary.BigEndian.AppendUint16(b, uint16(len(text)))
		return append(b, text...)
	case *Error:
		b := binary.BigEndian.AppendUint16([]byte{byte(m.Code)}, uint16(len(text)))
		return append(b, text...)
	}
	t.Fatalf("%T carries no text", m)
	return nil
}
