package cloudbundle

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParse: a bundle that parses has a usable pin and survives a JSON
// round trip.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"name":"c","points":[{"quic":"127.0.0.1:4433","tcp":"127.0.0.1:4434"}],"spki_sha256":"` +
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff" + `","verifiers":{"notary":{"key":"x"}}}`))
	f.Add([]byte(`{"version":1,"points":[{"tcp":"[::1]:1"}],"spki_sha256":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(data)
		if err != nil {
			return
		}
		if _, err := b.Pin(); err != nil {
			t.Fatalf("parsed bundle without a pin: %v", err)
		}
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		b2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-encoded bundle does not parse: %v", err)
		}
		if !reflect.DeepEqual(b.Points, b2.Points) || b.SPKISHA256 != b2.SPKISHA256 || b.Name != b2.Name {
			t.Fatalf("round trip changed the bundle: %+v vs %+v", b, b2)
		}
	})
}
