package treeproof

import "testing"

func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`{"version":2,"pkie":"ct","key":"` + "0000000000000000000000000000000000000000000000000000000000000000" + `","present":false,"checkpoint":"x\n","proof":"AQI="}`))
	f.Add([]byte(`{"version":1,"pkie":"revocation","sct":{"timestamp":1,"signature":"AA=="}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseResponse(b)
		if err != nil {
			return
		}
		if r.Version != ResponseVersion || (r.PKIE != CT && r.PKIE != Revocation) || len(r.Proof) == 0 {
			t.Fatalf("accepted malformed response %+v", r)
		}
	})
}
