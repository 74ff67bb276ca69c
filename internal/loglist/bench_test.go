package loglist

import "testing"

// BenchmarkParse is what loading Chrome's list costs once (118 logs, 70
// kB, every key parsed and every ID checked); a client does it at start
// and when the list changes, not per connection.
func BenchmarkParse(b *testing.B) {
	data := readFile(b, "chrome_log_list_v21.16.json")
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseSigned adds the RSA-4096 signature check.
func BenchmarkParseSigned(b *testing.B) {
	data := readFile(b, "chrome_log_list_v21.16.json")
	sig := readFile(b, "chrome_log_list_v21.16.sig")
	pub, err := ParsePublicKeyPEM(readFile(b, "chrome_log_list_pubkey.pem"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ParseSigned(data, sig, pub); err != nil {
			b.Fatal(err)
		}
	}
}
