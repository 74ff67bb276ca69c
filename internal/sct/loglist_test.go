package sct

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"testing"
)

// TestFixtureKeysAreChromes checks the real certificates' log keys against
// Chrome's v3 log list (testdata/loglist, signed by Google; the signature is
// checked first): each fixture key found in the list is the list's key for
// that log ID. Xenon2025h2 was created after this list was published; its
// key comes from the list the fixture's capturer fetched (testdata/README.md).
func TestFixtureKeysAreChromes(t *testing.T) {
	listed := chromeList(t)
	want := map[string]string{
		"google2025/log1-pubkey.bin":         "DigiCert Yeti2025 Log",
		"google2017/google-pilot-pubkey.bin": "Google 'Pilot' log",
		"google2017/symantec-log-pubkey.bin": "Symantec log",
	}
	for file, desc := range want {
		_, id := loadKey(t, file)
		if got := listed[id]; got.desc != desc {
			t.Errorf("%s: log %s in Chrome's list is %q, want %q", file, base64.StdEncoding.EncodeToString(id[:]), got.desc, desc)
		}
	}
}

// listedLog is a log of Chrome's list.
type listedLog struct {
	desc string
	key  crypto.PublicKey
}

// chromeList returns the logs of testdata/loglist's Chrome list by log ID,
// after checking Google's signature over it and each log ID.
func chromeList(t testing.TB) map[[32]byte]listedLog {
	t.Helper()
	list := readFixture(t, "loglist/chrome_log_list_v21.16.json")
	sig := readFixture(t, "loglist/chrome_log_list_v21.16.sig")
	p, _ := pem.Decode(readFixture(t, "loglist/chrome_log_list_pubkey.pem"))
	if p == nil {
		t.Fatal("chrome_log_list_pubkey.pem: no PEM block")
	}
	pub, err := x509.ParsePKIXPublicKey(p.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256(list)
	if err := rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, d[:], sig); err != nil {
		t.Fatalf("Chrome's log list signature: %v", err)
	}
	var doc struct {
		Operators []struct {
			Logs []struct {
				Description string `json:"description"`
				LogID       []byte `json:"log_id"`
				Key         []byte `json:"key"`
			} `json:"logs"`
		} `json:"operators"`
	}
	if err := json.Unmarshal(list, &doc); err != nil {
		t.Fatal(err)
	}
	listed := map[[32]byte]listedLog{}
	for _, op := range doc.Operators {
		for _, l := range op.Logs {
			id := sha256.Sum256(l.Key)
			if len(l.LogID) != 32 || [32]byte(l.LogID) != id {
				t.Fatalf("%s: log_id is not SHA-256 of its key", l.Description)
			}
			k, err := x509.ParsePKIXPublicKey(l.Key)
			if err != nil {
				t.Fatalf("%s: %v", l.Description, err)
			}
			listed[id] = listedLog{l.Description, k}
		}
	}
	return listed
}
