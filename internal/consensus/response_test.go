package consensus

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/store"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	keyOnce    sync.Once
	testKeys   [2]*rsa.PrivateKey
	testKeyErr error
)

// rsaKeys returns two RSA-2048 keys shared by the package's tests (key
// generation is slow under the race detector).
func rsaKeys(t testing.TB) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	keyOnce.Do(func() {
		for i := range testKeys {
			if testKeys[i], testKeyErr = rsa.GenerateKey(rand.Reader, 2048); testKeyErr != nil {
				return
			}
		}
	})
	if testKeyErr != nil {
		t.Fatal(testKeyErr)
	}
	return testKeys[0], testKeys[1]
}

// independentVerify checks a Convergence answer the way existing clients
// do, sharing no code with VerifyResponse: find `, "signature":`, cut,
// append "}", SHA1withRSA.
func independentVerify(body []byte, pub *rsa.PublicKey) error {
	s := string(body)
	i := strings.Index(s, `, "signature":`)
	if i < 0 {
		return fmt.Errorf("no signature")
	}
	signed := s[:i] + "}"
	rest := strings.TrimSpace(s[i+len(`, "signature":`):])
	rest = strings.TrimSuffix(strings.TrimSpace(rest), "}")
	rest = strings.Trim(strings.TrimSpace(rest), `"`)
	sig, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return err
	}
	h := sha1.Sum([]byte(signed))
	return rsa.VerifyPKCS1v15(pub, crypto.SHA1, h[:], sig)
}

// independentSign builds an answer body by hand, as a notary would, sharing
// no code with the notary package.
func independentSign(t testing.TB, key *rsa.PrivateKey, list string) []byte {
	t.Helper()
	signed := `{"fingerprintList":` + list + `}`
	h := sha1.Sum([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA1, h[:])
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"fingerprintList":` + list + `, "signature":"` + base64.StdEncoding.EncodeToString(sig) + "\"}\n")
}

const (
	fpA = "AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD"
	fpB = "01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67"
)

// TestNotaryAnswerVerifiesIndependently checks the notary's own signer
// against both the independent verifier and this package's.
func TestNotaryAnswerVerifiesIndependently(t *testing.T) {
	k, other := rsaKeys(t)
	recs := []store.Record{
		{SHA1: [20]byte{1, 2, 3}, First: time.Unix(1700000000, 0), Last: time.Unix(1700000100, 0)},
		{SHA1: [20]byte{4, 5, 6}, First: time.Unix(1700000200, 0), Last: time.Unix(1700000300, 0)},
	}
	body, err := notary.SignedBody(k, notary.FingerprintList(recs))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte(`"start":"1700000000","finish":"1700000100"`)) {
		t.Fatalf("body does not carry the timestamps as strings: %s", body)
	}
	if err := independentVerify(body, &k.PublicKey); err != nil {
		t.Fatalf("independent verifier rejects the notary's answer: %v\n%s", err, body)
	}
	if err := independentVerify(body, &other.PublicKey); err == nil {
		t.Fatal("independent verifier accepts the wrong key: the test cannot fail")
	}
	got, err := VerifyResponse(body, &k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Fingerprint != recs[1].SHA1 || !got[0].Start.Equal(recs[0].First) || got[0].Observed() != 100*time.Second {
		t.Fatalf("VerifyResponse = %+v", got)
	}
}

func TestVerifyResponse(t *testing.T) {
	k, other := rsaKeys(t)
	list := `[{"timestamp":{"start":"1700000000","finish":"1700000100"},"fingerprint":"` + fpA + `"},` +
		`{"timestamp":{"start":"1700000200","finish":"1700000300"},"fingerprint":"` + fpB + `"}]`
	good := independentSign(t, k, list)
	flip := func(b []byte, at int) []byte {
		c := bytes.Clone(b)
		c[at] ^= 0x01
		return c
	}
	tests := []struct {
		name    string
		body    []byte
		key     *rsa.PublicKey
		wantErr string
		want    int
	}{
		{"valid", good, &k.PublicKey, "", 2},
		{"valid empty list", independentSign(t, k, `[]`), &k.PublicKey, "", 0},
		{"wrong key", good, &other.PublicKey, "does not verify", 0},
		{"no key", good, nil, "no notary key", 0},
		{"flipped byte in fingerprint", flip(good, bytes.Index(good, []byte("AA:BB"))), &k.PublicKey, "does not verify", 0},
		{"flipped byte in timestamp", flip(good, bytes.Index(good, []byte("1700000100"))+9), &k.PublicKey, "does not verify", 0},
		{"flipped byte in signature", flip(good, len(good)-10), &k.PublicKey, "", -1},
		{"missing signature", []byte(`{"fingerprintList":` + list + `}`), &k.PublicKey, "no signature", 0},
		{"empty signature", []byte(`{"fingerprintList":[], "signature":""}`), &k.PublicKey, "empty signature", 0},
		{"signature not base64", []byte(`{"fingerprintList":[], "signature":"!!"}`), &k.PublicKey, "not base64", 0},
		{"truncated", good[:len(good)/2], &k.PublicKey, "", -1},
		{"signed but no list", independentSignRaw(t, k, `{"other":[]}`), &k.PublicKey, "no fingerprintList", 0},
		{"signed bad fingerprint", independentSign(t, k, `[{"timestamp":{"start":"1","finish":"2"},"fingerprint":"AA:BB"}]`), &k.PublicKey, "colon-separated hex", 0},
		{"signed numeric timestamp", independentSign(t, k, `[{"timestamp":{"start":1,"finish":2},"fingerprint":"`+fpA+`"}]`), &k.PublicKey, "not valid JSON", 0},
		{"signed negative timestamp", independentSign(t, k, `[{"timestamp":{"start":"-1","finish":"2"},"fingerprint":"`+fpA+`"}]`), &k.PublicKey, "not unix seconds", 0},
		{"signed finish before start", independentSign(t, k, `[{"timestamp":{"start":"5","finish":"2"},"fingerprint":"`+fpA+`"}]`), &k.PublicKey, "before start", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := VerifyResponse(tt.body, tt.key)
			switch {
			case tt.want < 0: // any error will do: must not verify
				if err == nil {
					t.Fatalf("tampered answer verified: %+v", got)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("VerifyResponse error = %v, want %q", err, tt.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != tt.want {
					t.Fatalf("got %d entries, want %d", len(got), tt.want)
				}
			}
			// The independent verifier must agree on the signature.
			key := tt.key
			if key == nil {
				key = &k.PublicKey
			}
			indep := independentVerify(tt.body, key)
			if (err == nil) && indep != nil {
				t.Fatalf("VerifyResponse accepted what the independent verifier rejects: %v", indep)
			}
		})
	}
}

func independentSignRaw(t testing.TB, key *rsa.PrivateKey, obj string) []byte {
	t.Helper()
	h := sha1.Sum([]byte(obj))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA1, h[:])
	if err != nil {
		t.Fatal(err)
	}
	return []byte(obj[:len(obj)-1] + `, "signature":"` + base64.StdEncoding.EncodeToString(sig) + `"}`)
}

func FuzzVerifyResponse(f *testing.F) {
	k, _ := rsaKeys(f)
	f.Add(independentSign(f, k, `[{"timestamp":{"start":"1","finish":"2"},"fingerprint":"`+fpA+`"}]`))
	f.Add([]byte(`{"fingerprintList":[], "signature":""}`))
	f.Add([]byte(`, "signature":`))
	f.Fuzz(func(t *testing.T, body []byte) {
		entries, err := VerifyResponse(body, &k.PublicKey)
		if err == nil && independentVerify(body, &k.PublicKey) != nil && !bytes.Contains(body, []byte("\\")) {
			t.Fatalf("accepted an answer the independent verifier rejects: %q (%d entries)", body, len(entries))
		}
	})
}
