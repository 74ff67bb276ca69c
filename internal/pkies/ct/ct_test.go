package ct

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"

	"github.com/pkie/pkie/checkpoint"
)

// TestVerifierConfig: the mirror's key and the log's key are both pinned;
// a configuration that cannot verify anything is refused, naming the
// field, and mmd is gone.
func TestVerifierConfig(t *testing.T) {
	_, mirrorKey, _ := checkpoint.GenerateKey("mirror.pkie.test/ct")
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	logKey, err := fnote.RFC6962VerifierString("log.pkie.test/2026", ek.Public())
	if err != nil {
		t.Fatal(err)
	}
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaKey, _ := fnote.RFC6962VerifierString("log.pkie.test/2026", rk.Public())
	_, sameName, _ := checkpoint.GenerateKey("log.pkie.test/2026")
	if _, err := NewVerifier(VerifierConfig{Key: mirrorKey, LogKey: logKey}.JSON()); err != nil {
		t.Fatalf("mirror and log keys: %v", err)
	}
	for _, tc := range []struct {
		name, config, want string
	}{
		{"mmd", `{"key":"` + mirrorKey + `","log_key":"` + logKey + `","mmd":"24h"}`, "mmd"},
		{"no key", string(VerifierConfig{LogKey: logKey}.JSON()), "key"},
		{"no log key (the single-key form of pkie's old log)", string(VerifierConfig{Key: mirrorKey}.JSON()), "log_key"},
		{"RSA log key", string(VerifierConfig{Key: mirrorKey, LogKey: rsaKey}.JSON()), "ECDSA P-256"},
		{"junk log key", string(VerifierConfig{Key: mirrorKey, LogKey: "junk"}.JSON()), "log key"},
		{"log key as mirror key", string(VerifierConfig{Key: logKey, LogKey: logKey}.JSON()), "mirror key"},
		{"mirror named like the log", string(VerifierConfig{Key: sameName, LogKey: logKey}.JSON()), "name of its own"},
		{"negative max_age", `{"key":"` + mirrorKey + `","log_key":"` + logKey + `","max_age":"-1h"}`, "max_age"},
	} {
		_, err := NewVerifier([]byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
