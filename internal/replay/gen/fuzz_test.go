package gen

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzReadOptions feeds arbitrary options files to ReadOptions: it must
// not panic, and what it accepts must write out and read back the same.
func FuzzReadOptions(f *testing.F) {
	def, _ := json.Marshal(DefaultOptions())
	f.Add(def)
	f.Add([]byte(`{"flows":1000,"clients":10}`))
	f.Add([]byte(`{"providers":[{"name":"x","share":1,"resolvable":true,"hosts":3,"zipf":1,"addrs":1,"style":"site"}]}`))
	f.Add([]byte(`{"start":"2013-04-21T17:00:00Z","duration_ns":-1}`))
	f.Add([]byte(`{"providers":[{"name":"x","share":1,"hosts":3,"addrs":2,"style":"nope"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ReadOptions(bytes.NewReader(b))
		if err != nil {
			return
		}
		again, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("accepted options do not marshal: %v", err)
		}
		o2, err := ReadOptions(bytes.NewReader(again))
		if err != nil {
			t.Fatalf("accepted options read back refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(o.Providers, o2.Providers) || !o.Start.Equal(o2.Start) || o.Flows != o2.Flows || o.Seed != o2.Seed {
			t.Fatalf("options changed on the way back:\n%+v\n%+v", o, o2)
		}
	})
}
