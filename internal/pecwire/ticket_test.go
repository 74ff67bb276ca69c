package pecwire

import (
	"testing"
	"time"

	"github.com/pkie/pkie"
)

// TestTicket: a ticket binds the key, its counter, the client, the nonce,
// the server name (ASCII case folded), the port and the requests, and
// nothing the client does not know when it sends its ClientHello (the
// chain, the ct request's parameters, the budget).
func TestTicket(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	base := Submit{ClientID: ClientID{1, 2, 3, 4}, Nonce: Nonce{8, 7, 6, 5, 4, 3, 2, 1}, Budget: time.Second,
		ServerName: "Example.COM", Port: 443,
		Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Notary, Params: []byte{1, 2}}},
		Chain:    [][]byte{{0x30, 0x03, 1, 2, 3}}}
	tk := MintTicket(key, 5, &base)
	same := base
	same.ServerName, same.Budget, same.Chain = "example.com", 0, [][]byte{{0x30, 0}}
	// The ct request's parameters are the SCTs a PEC server adds from
	// its own certificate: the client cannot know them in its ClientHello.
	withSCTs := base
	withSCTs.Requests = []pkie.Request{{ID: pkie.CT, Params: []byte{0, 3, 0, 1, 9}}, {ID: pkie.Notary, Params: []byte{1, 2}}}
	if !tk.Verify(key, &base) || !tk.Verify(key, &same) || !tk.Verify(key, &withSCTs) {
		t.Fatal("a ticket does not verify for its own submission")
	}
	for name, change := range map[string]func(*Submit, *Ticket, *[]byte){
		"key":      func(_ *Submit, _ *Ticket, k *[]byte) { *k = []byte("another key, also of 32 bytes...") },
		"no key":   func(_ *Submit, _ *Ticket, k *[]byte) { *k = nil },
		"counter":  func(_ *Submit, t *Ticket, _ *[]byte) { t.Counter++ },
		"tag":      func(_ *Submit, t *Ticket, _ *[]byte) { t.Tag[15] ^= 0x80 },
		"client":   func(m *Submit, _ *Ticket, _ *[]byte) { m.ClientID[0]++ },
		"nonce":    func(m *Submit, _ *Ticket, _ *[]byte) { m.Nonce[7]++ },
		"name":     func(m *Submit, _ *Ticket, _ *[]byte) { m.ServerName = "example.org" },
		"port":     func(m *Submit, _ *Ticket, _ *[]byte) { m.Port = 8443 },
		"requests": func(m *Submit, _ *Ticket, _ *[]byte) { m.Requests = m.Requests[:1] },
		"params": func(m *Submit, _ *Ticket, _ *[]byte) {
			m.Requests = []pkie.Request{{ID: pkie.CT}, {ID: pkie.Notary, Params: []byte{1, 3}}}
		},
	} {
		m, tt, k := base, tk, key
		change(&m, &tt, &k)
		if tt.Verify(k, &m) {
			t.Errorf("%s changed, the ticket still verifies", name)
		}
	}
}
