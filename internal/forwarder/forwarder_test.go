package forwarder

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

func testKey() []byte { return bytes.Repeat([]byte{0x5a}, 32) }

// TestEphIDs: an identifier names its client and expiry, differs at every
// issue, and is refused when tampered with or made under another key.
func TestEphIDs(t *testing.T) {
	e, err := newEphIDs(testKey())
	if err != nil {
		t.Fatal(err)
	}
	client := pecwire.ClientID{1, 2, 3, 4}
	exp := time.Unix(1_900_000_000, 0)
	a, _ := e.issue(client, exp)
	b, _ := e.issue(client, exp)
	if len(a) != EphIDSize || len(a) > pecwire.MaxEphID || bytes.Equal(a, b) {
		t.Fatalf("identifiers %x and %x", a, b)
	}
	if bytes.Contains(a, client[:]) {
		t.Fatal("the identifier holds the client identifier in the clear")
	}
	c, got, err := e.open(a)
	if err != nil || c != client || !got.Equal(exp) {
		t.Fatalf("open: %v %v %v", c, got, err)
	}
	other, _ := newEphIDs(bytes.Repeat([]byte{1}, 32))
	if _, _, err := other.open(a); err == nil {
		t.Error("another key opened it")
	}
	for i := range a {
		x := bytes.Clone(a)
		x[i] ^= 1
		if _, _, err := e.open(x); err == nil {
			t.Errorf("tampered byte %d: opened", i)
		}
	}
}

// TestUsedSet: one use per identifier; the use lasts its window and its
// allowance; expired identifiers are refused and forgotten; the memory is
// bounded.
func TestUsedSet(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	u := newUsedSet(2, 10*time.Second, 2)
	exp := now.Add(time.Minute)
	id1, id2, id3 := []byte("one"), []byte("two"), []byte("three")
	if err := u.open(id1, exp, now); err != nil {
		t.Fatal(err)
	}
	if err := u.open(id1, exp, now); !errors.Is(err, errReused) {
		t.Fatalf("second use: %v", err)
	}
	if err := u.relay(id1, exp, now); err != nil {
		t.Fatal(err)
	}
	if err := u.relay(id1, exp, now); err != nil {
		t.Fatal(err)
	}
	if err := u.relay(id1, exp, now); !errors.Is(err, errReused) {
		t.Fatalf("past the allowance: %v", err)
	}
	// relay opens a use (client–server mode), which then closes with
	// its window.
	if err := u.relay(id2, exp, now); err != nil {
		t.Fatal(err)
	}
	if err := u.relay(id2, exp, now.Add(11*time.Second)); !errors.Is(err, errReused) {
		t.Fatalf("past the window: %v", err)
	}
	if err := u.open(id3, exp, now); !errors.Is(err, errFull) {
		t.Fatalf("full: %v", err)
	}
	if err := u.open(id3, exp, exp); !errors.Is(err, errExpired) {
		t.Fatalf("expired: %v", err)
	}
	// Once the first two expire they are forgotten, making room.
	later := exp.Add(time.Second)
	if err := u.open(id3, later.Add(time.Minute), later); err != nil || u.len() != 1 {
		t.Fatalf("after expiry: %v, %d remembered", err, u.len())
	}
}

// TestDataDir: init writes the keys 0600 and refuses to overwrite; load
// refuses keys readable by others.
func TestDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fwd")
	d, err := Init(dir, "fwd.test")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "fwd.test" || len(d.EphIDKey) != 32 || len(d.SPKIHash()) != 64 {
		t.Fatalf("%+v", d)
	}
	for _, f := range []string{FileKey, FileEphID} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi.Mode(), err)
		}
	}
	if _, err := Init(dir, "again"); err == nil {
		t.Fatal("init overwrote a data directory")
	}
	l, err := Load(dir)
	if err != nil || !bytes.Equal(l.EphIDKey, d.EphIDKey) {
		t.Fatalf("load: %v", err)
	}
	os.Chmod(filepath.Join(dir, FileEphID), 0o644)
	if _, err := Load(dir); err == nil {
		t.Fatal("loaded an identifier key readable by others")
	}
}

// FuzzEphIDOpen: arbitrary bytes never panic the forwarder and never open
// as an identifier unless the key made them.
func FuzzEphIDOpen(f *testing.F) {
	e, err := newEphIDs(testKey())
	if err != nil {
		f.Fatal(err)
	}
	id, _ := e.issue(pecwire.ClientID{9, 9, 9, 9}, time.Unix(1_900_000_000, 0))
	f.Add(id)
	f.Add(id[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, _, err := e.open(b)
		if err == nil && c != (pecwire.ClientID{9, 9, 9, 9}) {
			t.Fatalf("%x opened as client %v", b, c)
		}
	})
}

// TestCloudAuthentication: a peer presenting a certificate of a key no
// configured cloud's bundle pins fails the handshake; the cloud's own
// certificate authenticates it as that cloud, whose session may not
// register as a client; a peer without a certificate is a client, and a
// proof it sends ends its session.
func TestCloudAuthentication(t *testing.T) {
	for _, transport := range []string{pecwire.TCP, pecwire.QUIC} {
		t.Run(transport, func(t *testing.T) { testCloudAuthentication(t, transport) })
	}
}

func testCloudAuthentication(t *testing.T, transport string) {
	cloudCert := selfSigned(t, "auth-cloud")
	fw, err := New(Config{Certificate: selfSigned(t, "auth-forwarder"), EphIDKey: testKey(),
		Clouds: []*pecwire.Bundle{bundleFor("auth-cloud", cloudCert, "127.0.0.1:1")}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { fw.ServeTCP(ctx, ln) })
	wg.Go(func() { fw.ServeQUIC(ctx, pc) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		fw.Wait()
		pc.Close()
	})
	pin := pecwire.SPKIHash(fw.cfg.Certificate.Leaf)
	dial := func(cert *tls.Certificate) (*pecwire.Conn, error) {
		tc := pecwire.ClientTLS(pin)
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		var c *pecwire.Conn
		var err error
		if transport == pecwire.QUIC {
			c, err = pecwire.DialQUIC(dctx, pc.LocalAddr().String(), tc, nil)
		} else {
			c, err = pecwire.DialTCP(dctx, ln.Addr().String(), tc)
		}
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { c.Close() })
		return c, nil
	}
	exchange := func(c *pecwire.Conn, m pecwire.Message) (pecwire.Message, error) {
		dl := time.Now().Add(10 * time.Second)
		if err := c.Send(m, dl); err != nil {
			return nil, err
		}
		return c.Recv(dl)
	}
	// TLS 1.3: the server's verdict on a client certificate comes
	// after the client's handshake is done, with the first read.
	stranger := selfSigned(t, "auth-cloud")
	if c, err := dial(&stranger); err == nil {
		if m, err := exchange(c, &pecwire.Ping{Seq: 1}); err == nil {
			t.Fatalf("an unknown certificate's session answered %T", m)
		}
	}
	c, err := dial(&cloudCert)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := exchange(c, &pecwire.Ping{Seq: 7}); err != nil {
		t.Fatal(err)
	} else if p, ok := m.(*pecwire.Pong); !ok || p.Seq != 7 {
		t.Fatalf("the cloud's session answered %v", m)
	}
	if m, _ := exchange(c, &pecwire.Register{Version: pecwire.Version}); m == nil {
		t.Fatal("no answer to the cloud's Register")
	} else if e, ok := m.(*pecwire.Error); !ok || e.Code != pecwire.RejectInvalid {
		t.Fatalf("the cloud's Register answered %v", m)
	}
	c, err = dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := exchange(c, &pecwire.EphIDReject{EphID: []byte("someone's"), Code: pecwire.RejectInvalid}); m == nil {
		t.Fatal("no answer to a client's EphIDReject")
	} else if e, ok := m.(*pecwire.Error); !ok || e.Code != pecwire.RejectInvalid {
		t.Fatalf("a client's EphIDReject answered %v", m)
	}
}

// TestUnpaddedSubmission: a sealed submission whose envelope is not of a
// size class (a client older than padding) is refused as invalid, with
// the reason, before its identifier is spent; one of a class is relayed
// (here to a cloud that cannot be reached: refused busy).
func TestUnpaddedSubmission(t *testing.T) {
	cloudCert := selfSigned(t, "pad-cloud")
	cb := bundleFor("pad-cloud", cloudCert, "127.0.0.1:1")
	fw, err := New(Config{Certificate: selfSigned(t, "pad-forwarder"), EphIDKey: testKey(), Clouds: []*pecwire.Bundle{cb}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { fw.ServeTCP(ctx, ln) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		fw.Wait()
	})
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	c, err := pecwire.DialTCP(dctx, ln.Addr().String(), pecwire.ClientTLS(pecwire.SPKIHash(fw.cfg.Certificate.Leaf)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange := func(m pecwire.Message) pecwire.Message {
		t.Helper()
		dl := time.Now().Add(10 * time.Second)
		if err := c.Send(m, dl); err != nil {
			t.Fatal(err)
		}
		got, err := c.Recv(dl)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if m := exchange(&pecwire.Register{Version: pecwire.Version}); m.Type() != pecwire.TypeRegistered {
		t.Fatalf("Register answered %+v", m)
	}
	ids, ok := exchange(&pecwire.EphIDRequest{Count: 1}).(*pecwire.EphIDs)
	if !ok {
		t.Fatal("no identifiers")
	}
	pin, _ := cb.Pin()
	const overhead = 7 + 32 + 16 // HPKE header, encapsulated key, tag
	for _, tc := range []struct {
		name string
		size int
		want pecwire.RejectCode
		text string
	}{
		{"unpadded", 1054, pecwire.RejectInvalid, "not padded"},
		{"one byte short of a class", overhead + 2048 - 1, pecwire.RejectInvalid, "not padded"},
		{"a class", overhead + 2048, pecwire.RejectBusy, "unreachable"},
	} {
		m := exchange(&pecwire.SealedSubmit{Cloud: pin, EphID: ids.IDs[0], Envelope: make([]byte, tc.size)})
		r, ok := m.(*pecwire.EphIDReject)
		if !ok || r.Code != tc.want || !strings.Contains(r.Text, tc.text) {
			t.Errorf("%s: got %+v, want EphIDReject %s saying %q", tc.name, m, tc.want, tc.text)
		}
	}
}
