package consensus

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edit returns the fixture bundle as a generic map, changed by f, as JSON.
func edit(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFixture(t, "notary-a.notary"), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// v0 returns the version-0 fixture (no version field, one host at the top
// level, as the original notary's convergence-bundle.py wrote it), changed
// by f, as JSON.
func v0(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFixture(t, "convergence-v0/mynotarybundle.notary"), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func host0(m map[string]any) map[string]any { return m["hosts"].([]any)[0].(map[string]any) }

func TestParseBundle(t *testing.T) {
	certB := host0(func() map[string]any {
		var m map[string]any
		json.Unmarshal(readFixture(t, "notary-b.notary"), &m)
		return m
	}())["certificate"].(string)
	tests := []struct {
		name    string
		data    []byte
		wantErr string // "" = valid
	}{
		{"valid", readFixture(t, "notary-a.notary"), ""},
		{"valid single host", readFixture(t, "notary-b.notary"), ""},
		{"unknown fields ignored", edit(t, func(m map[string]any) { m["future"] = true }), ""},
		{"http_port zero means no bouncing", edit(t, func(m map[string]any) { host0(m)["http_port"] = 0 }), ""},
		{"empty", []byte(""), "not valid JSON"},
		{"not json", []byte("hosts: []"), "not valid JSON"},
		{"array", []byte("[]"), "not valid JSON"},
		{"trailing data", append(readFixture(t, "notary-b.notary"), []byte(`{"x":1}`)...), "data after its JSON object"},
		{"version 2", edit(t, func(m map[string]any) { m["version"] = 2 }), "version 2 is not supported"},
		{"version missing on a hosts list", edit(t, func(m map[string]any) { delete(m, "version") }), `not marked "version": 1`},
		{"version 0 on a hosts list", edit(t, func(m map[string]any) { m["version"] = 0 }), `not marked "version": 1`},
		{"version not a number", edit(t, func(m map[string]any) { m["version"] = "1" }), "not a number"},
		{"convergence-bundle.py output (no version)", readFixture(t, "convergence-v0/mynotarybundle.notary"), ""},
		{"version 0", readFixture(t, "convergence-v0/version0.notary"), ""},
		{"version 0 without host", v0(t, func(m map[string]any) { delete(m, "host") }), "has no host"},
		{"version 0 bad port", v0(t, func(m map[string]any) { m["ssl_port"] = 0 }), "ssl_port 0 is out of range"},
		{"version 0 without certificate", v0(t, func(m map[string]any) { delete(m, "certificate") }), "not PEM"},
		{"version 0 with v1 key", v0(t, func(m map[string]any) { m[V1FieldName] = testV1Key }), ""},
		{"no name", edit(t, func(m map[string]any) { m["name"] = " " }), "has no name"},
		{"no hosts", edit(t, func(m map[string]any) { m["hosts"] = []any{} }), "lists no hosts"},
		{"too many hosts", edit(t, func(m map[string]any) {
			hs := []any{}
			for range 33 {
				hs = append(hs, host0(m))
			}
			m["hosts"] = hs
		}), "at most 32"},
		{"empty host", edit(t, func(m map[string]any) { host0(m)["host"] = "" }), "empty host name"},
		{"host with path", edit(t, func(m map[string]any) { host0(m)["host"] = "a.test/x" }), "not a host name"},
		{"ssl port 0", edit(t, func(m map[string]any) { host0(m)["ssl_port"] = 0 }), "ssl_port 0 is out of range"},
		{"ssl port 70000", edit(t, func(m map[string]any) { host0(m)["ssl_port"] = 70000 }), "ssl_port 70000 is out of range"},
		{"http port negative", edit(t, func(m map[string]any) { host0(m)["http_port"] = -1 }), "http_port -1 is out of range"},
		{"port as string", edit(t, func(m map[string]any) { host0(m)["ssl_port"] = "443" }), "not valid JSON"},
		{"certificate not PEM", edit(t, func(m map[string]any) { host0(m)["certificate"] = "MIIB" }), "not PEM"},
		{"certificate wrong block", edit(t, func(m map[string]any) {
			host0(m)["certificate"] = strings.ReplaceAll(certB, "CERTIFICATE", "PRIVATE KEY")
		}), `is "PRIVATE KEY"`},
		{"two certificates", edit(t, func(m map[string]any) { host0(m)["certificate"] = certB + certB }), "more than one PEM block"},
		{"garbage DER", edit(t, func(m map[string]any) {
			host0(m)["certificate"] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
		}), "does not parse"},
		{"ECDSA key", readFixture(t, "ecdsa.notary.bad"), "sign with RSA"},
		{"RSA-1024 key", readFixture(t, "rsa1024.notary.bad"), "1024 bits"},
		{"oversized", make([]byte, maxBundleSize+1), "at most"},
		{"v1 key", edit(t, func(m map[string]any) { host0(m)[V1FieldName] = testV1Key }), ""},
		{"v1 key empty is absent", edit(t, func(m map[string]any) { host0(m)[V1FieldName] = "" }), ""},
		{"v1 key not base64", edit(t, func(m map[string]any) { host0(m)[V1FieldName] = "not base64!" }), V1FieldName + " is not base64"},
		{"v1 key too short", edit(t, func(m map[string]any) { host0(m)[V1FieldName] = "AAAA" }), "key is 3 bytes"},
		{"v1 key not a string", edit(t, func(m map[string]any) { host0(m)[V1FieldName] = 5 }), "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseBundle(tt.data)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseBundle: %v", err)
				}
				for _, h := range b.Hosts {
					if h.Cert() == nil || h.PublicKey() == nil {
						t.Fatalf("host %s has no parsed certificate", h.Host)
					}
				}
				if got := b.Hosts[0].V1PublicKey(); (got != nil) != (b.Hosts[0].V1Key != "") ||
					(got != nil && base64.StdEncoding.EncodeToString(got) != testV1Key) {
					t.Fatalf("v1 key %x from field %q", got, b.Hosts[0].V1Key)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseBundle error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// testV1Key is a base64 Ed25519 public key (32 bytes).
const testV1Key = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="

func TestBundleV1KeyRoundTrip(t *testing.T) {
	b, err := ParseBundle(edit(t, func(m map[string]any) { host0(m)[V1FieldName] = testV1Key }))
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"`+V1FieldName+`": "`+testV1Key+`"`) {
		t.Fatalf("marshalled bundle lost the v1 key:\n%s", out)
	}
	// Hosts without the key do not grow an empty field: a Convergence
	// bundle stays as it was.
	if strings.Count(string(out), V1FieldName) != 1 {
		t.Fatalf("v1 field written for a host without a key:\n%s", out)
	}
	b2, err := ParseBundle(out)
	if err != nil || !b2.Hosts[0].V1PublicKey().Equal(b.Hosts[0].V1PublicKey()) || b2.Hosts[1].V1PublicKey() != nil {
		t.Fatalf("re-parse: %v", err)
	}
	h := b2.Hosts[1]
	if err := h.PinV1(make([]byte, 31)); err == nil {
		t.Fatal("PinV1 accepted a 31-byte key")
	}
}

func TestBundleMarshalRoundTrip(t *testing.T) {
	b, err := ParseBundle(readFixture(t, "notary-a.notary"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := ParseBundle(out)
	if err != nil {
		t.Fatalf("re-parsing marshalled bundle: %v\n%s", err, out)
	}
	if b2.Name != b.Name || len(b2.Hosts) != 2 || b2.Hosts[1].Host != "notary-a2.test" || b2.Region != "US" ||
		!b2.Hosts[0].Cert().Equal(b.Hosts[0].Cert()) {
		t.Fatalf("round trip changed the bundle: %+v", b2)
	}
	h, err := NewHost("n.test", 4443, 0, b.Hosts[0].Cert())
	if err != nil {
		t.Fatal(err)
	}
	if h.HTTPAddr() != "" || h.SSLAddr() != "n.test:4443" {
		t.Fatalf("addresses: %q %q", h.HTTPAddr(), h.SSLAddr())
	}
}

// TestVersion0Bundles reads bundles shaped exactly as the original notary
// wrote them (no version, one host at the top level) and with "version": 0,
// as the Convergence Firefox client does: one host, the bundle named after
// it; rendered again they become the version-1 equivalent.
func TestVersion0Bundles(t *testing.T) {
	bs, err := LoadDir(filepath.Join("testdata", "convergence-v0"))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name          string
		ssl, httpPort int
	}{{"notary-c.test", 443, 80}, {"notary-d.test", 4242, 0}}
	if len(bs) != len(want) {
		t.Fatalf("loaded %d bundles, want %d", len(bs), len(want))
	}
	for i, b := range bs {
		w := want[i]
		if b.Version != 0 || b.Name != w.name || len(b.Hosts) != 1 {
			t.Fatalf("bundle %d = version %d name %q %d hosts; want version 0 %q 1 host", i, b.Version, b.Name, len(b.Hosts), w.name)
		}
		h := b.Hosts[0]
		if h.Host != w.name || h.SSLPort != w.ssl || h.HTTPPort != w.httpPort || h.PublicKey() == nil {
			t.Fatalf("bundle %d host = %s:%d http %d key %v", i, h.Host, h.SSLPort, h.HTTPPort, h.PublicKey() != nil)
		}
		out, err := b.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		b1, err := ParseBundle(out)
		if err != nil || b1.Version != 1 || b1.Name != w.name || len(b1.Hosts) != 1 || !b1.Hosts[0].Cert().Equal(h.Cert()) {
			t.Fatalf("version-1 rendering %s re-parsed as %+v, %v", out, b1, err)
		}
	}
}

func TestLoadDir(t *testing.T) {
	t.Run("fixtures", func(t *testing.T) {
		bs, err := LoadDir("testdata")
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) != 2 || bs[0].Name != "notary-a" || bs[1].Name != "notary-b" {
			t.Fatalf("loaded %d bundles, want notary-a and notary-b (in name order, *.notary only)", len(bs))
		}
	})
	t.Run("malformed file is named", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "a.notary"), readFixture(t, "notary-a.notary"), 0o644)
		os.WriteFile(filepath.Join(dir, "broken.notary"), []byte(`{"version":1,`), 0o644)
		_, err := LoadDir(dir)
		if err == nil || !strings.Contains(err.Error(), "broken.notary") || !strings.Contains(err.Error(), "not valid JSON") {
			t.Fatalf("LoadDir error = %v, want it to name broken.notary", err)
		}
	})
	t.Run("same notary twice", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "a.notary"), readFixture(t, "notary-a.notary"), 0o644)
		os.WriteFile(filepath.Join(dir, "copy.notary"), readFixture(t, "notary-a.notary"), 0o644)
		_, err := LoadDir(dir)
		if err == nil || !strings.Contains(err.Error(), "vote twice") {
			t.Fatalf("LoadDir error = %v, want a duplicate-notary error", err)
		}
	})
	t.Run("missing dir", func(t *testing.T) {
		_, err := LoadDir(filepath.Join(t.TempDir(), "nope"))
		if err == nil || !strings.Contains(err.Error(), "notaries directory") {
			t.Fatalf("LoadDir error = %v", err)
		}
	})
	t.Run("empty dir", func(t *testing.T) {
		bs, err := LoadDir(t.TempDir())
		if err != nil || len(bs) != 0 {
			t.Fatalf("LoadDir = %d, %v", len(bs), err)
		}
	})
}

func FuzzParseBundle(f *testing.F) {
	for _, n := range []string{"notary-a.notary", "notary-b.notary", "ecdsa.notary.bad", "rsa1024.notary.bad"} {
		f.Add(readFixture(f, n))
	}
	f.Add([]byte(`{"version":1,"name":"x","hosts":[{"host":"h","ssl_port":1,"certificate":""}]}`))
	f.Add([]byte(`{}`))
	f.Add(readFixture(f, "convergence-v0/mynotarybundle.notary"))
	f.Add(readFixture(f, "convergence-v0/version0.notary"))
	f.Add([]byte(`{"version":0,"host":"h","ssl_port":1,"certificate":"","hosts":null}`))
	f.Add([]byte(`{"version":null,"host":"h","ssl_port":1,"certificate":""}`))
	var m map[string]any
	json.Unmarshal(readFixture(f, "notary-b.notary"), &m)
	host0(m)[V1FieldName] = testV1Key
	withKey, _ := json.Marshal(m)
	f.Add(withKey)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBundle(data)
		if err != nil {
			if b != nil {
				t.Fatal("bundle returned with an error")
			}
			return
		}
		// A bundle that parses must be usable: every host pinned to an
		// RSA key, and its rendering must parse again.
		for _, h := range b.Hosts {
			if h.PublicKey() == nil {
				t.Fatalf("host %q has no RSA key", h.Host)
			}
			if (h.V1Key != "") != (len(h.V1PublicKey()) == ed25519.PublicKeySize) {
				t.Fatalf("host %q: v1 field %q but key %x", h.Host, h.V1Key, h.V1PublicKey())
			}
		}
		out, err := b.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed bundle: %v", err)
		}
		if _, err := ParseBundle(out); err != nil {
			t.Fatalf("re-parse: %v", err)
		}
	})
}
