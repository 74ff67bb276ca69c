package oldctlog

import (
	"encoding/json"
	"testing"
)

func FuzzParseEntries(f *testing.F) {
	in, _ := (&Leaf{Timestamp: 1, Type: X509Entry, Data: []byte{0x30, 0x03, 1, 2, 3}}).Marshal()
	good, _ := json.Marshal(map[string]any{"entries": []Entry{{Index: 7, LeafInput: in}, {Index: 8, LeafInput: in, Chain: [][]byte{{1}}}}})
	f.Add(good, uint64(7), 2)
	f.Add([]byte(`{"entries":[{"index":0,"leaf_input":"AAA="}]}`), uint64(0), 1)
	f.Add([]byte(`{"entries":[]}`), uint64(0), 5)
	f.Add([]byte(`{"entries":[{"index":1}]}`), uint64(0), 5)
	f.Fuzz(func(t *testing.T, body []byte, start uint64, asked int) {
		es, err := parseEntries(body, start, asked)
		if err != nil {
			return
		}
		if len(es) == 0 || len(es) > asked {
			t.Fatalf("%d entries accepted for %d asked", len(es), asked)
		}
		for i, e := range es {
			if e.Index != start+uint64(i) || len(e.LeafInput) == 0 {
				t.Fatalf("entry %d accepted: index %d, %d leaf bytes", i, e.Index, len(e.LeafInput))
			}
		}
	})
}

func FuzzParseProofHashes(f *testing.F) {
	h := make([]byte, 32)
	good, _ := json.Marshal(map[string]any{"index": 1, "size": 4, "hashes": [][]byte{h, h}})
	f.Add(good)
	f.Add([]byte(`{"hashes":[]}`))
	f.Add([]byte(`{"hashes":["AAAA"]}`))
	f.Add([]byte(`{"hashes":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParseProofHashes(body)
		if err != nil {
			return
		}
		if len(p) > maxProofHashes {
			t.Fatalf("%d hashes accepted", len(p))
		}
		for i, h := range p {
			if len(h) != 32 {
				t.Fatalf("hash %d of %d bytes accepted", i, len(h))
			}
		}
	})
}
