package verify

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeAnswer(t *testing.T) {
	const ph = `"phases":{"roots_ns":5,"chain_ns":6,"verify_ns":7,"hostname_ns":8}`
	for _, tc := range []struct {
		name, line string
		want       Result
		err        string
	}{
		{"valid", `{"id":3,"valid":true,"code":"ok","reason":"ok","depth":3,` + ph + `}`,
			Result{Valid: true, Code: OK, Reason: "ok", Depth: 3, Phases: Phases{Roots: 5, Chain: 6, Verify: 7, Hostname: 8}}, ""},
		{"invalid", `{"id":3,"valid":false,"code":"expired","reason":"certificate has expired","roots_skipped":2,` + ph + `}`,
			Result{Code: Expired, Reason: "certificate has expired", RootsSkipped: 2, Phases: Phases{Roots: 5, Chain: 6, Verify: 7, Hostname: 8}}, ""},
		{"crlf", `{"id":3,"valid":false,"code":"other",` + ph + "}\r\n", Result{Code: Other, Phases: Phases{Roots: 5, Chain: 6, Verify: 7, Hostname: 8}}, ""},
		{"refusal", `{"id":3,"error":"no roots"}`, Result{}, "helper refused the request: no roots"},
		{"error and verdict", `{"id":3,"error":"x","valid":true,"code":"ok",` + ph + `}`, Result{}, "both an error and a verdict"},
		{"other id", `{"id":4,"valid":true,"code":"ok","depth":1,` + ph + `}`, Result{}, "for request 4, want 3"},
		{"no id", `{"valid":true,"code":"ok",` + ph + `}`, Result{}, "no id"},
		{"no valid", `{"id":3,"code":"ok",` + ph + `}`, Result{}, "lacks valid"},
		{"no phases", `{"id":3,"valid":false,"code":"other"}`, Result{}, "lacks valid, code or phases"},
		{"missing phase", `{"id":3,"valid":false,"code":"other","phases":{"roots_ns":1,"chain_ns":1,"verify_ns":1}}`, Result{}, "lacks a phase"},
		{"negative phase", `{"id":3,"valid":false,"code":"other","phases":{"roots_ns":-1,"chain_ns":1,"verify_ns":1,"hostname_ns":0}}`, Result{}, "roots_ns is -1"},
		{"huge phase", `{"id":3,"valid":false,"code":"other","phases":{"roots_ns":1,"chain_ns":1,"verify_ns":9000000000000,"hostname_ns":0}}`, Result{}, "verify_ns is"},
		{"unknown code", `{"id":3,"valid":false,"code":"revoked",` + ph + `}`, Result{}, `unknown code "revoked"`},
		{"valid but code", `{"id":3,"valid":true,"code":"expired","depth":2,` + ph + `}`, Result{}, `valid=true with code "expired"`},
		{"invalid but ok", `{"id":3,"valid":false,"code":"ok",` + ph + `}`, Result{}, `valid=false with code "ok"`},
		{"valid no path", `{"id":3,"valid":true,"code":"ok",` + ph + `}`, Result{}, "valid with no path"},
		{"negative depth", `{"id":3,"valid":false,"code":"other","depth":-1,` + ph + `}`, Result{}, "out of range"},
		{"trailing", `{"id":3,"valid":false,"code":"other",` + ph + `} {}`, Result{}, "data after"},
		{"not json", `valid`, Result{}, "not JSON"},
		{"string id", `{"id":"3","valid":false,"code":"other",` + ph + `}`, Result{}, "not JSON"},
		{"id 0 refusal", `{"id":0,"error":"request longer than 16777216 bytes"}`, Result{}, "helper refused the request: request longer"},
		{"other case", `{"ID":3,"VALID":true,"Code":"ok","depth":1,` + ph + `}`, Result{}, `unknown field "ID"`},
		{"phase case", `{"id":3,"valid":false,"code":"other","phases":{"Roots_ns":1,"chain_ns":1,"verify_ns":1,"hostname_ns":0}}`, Result{}, `unknown field "Roots_ns"`},
		{"duplicate", `{"id":2,"id":3,"valid":false,"code":"other",` + ph + `}`, Result{}, `"id" twice`},
		{"null error", `{"id":3,"error":null,"valid":false,"code":"other",` + ph + `}`, Result{}, "both an error and a verdict"},
		{"invalid with depth", `{"id":3,"valid":false,"code":"expired","depth":7,` + ph + `}`, Result{}, "gives a path depth"},
		{"not an object", `[1]`, Result{}, "not a JSON object"},
		{"too long", `{"id":3,"reason":"` + strings.Repeat("x", MaxAnswerLine) + `"}`, Result{}, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeAnswer([]byte(tc.line), 3)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want error %q", got, err, tc.err)
				}
				if tc.name == "refusal" {
					var he *HelperError
					if !errors.As(err, &he) {
						t.Errorf("a refusal is not a *HelperError: %T", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDecodeHello(t *testing.T) {
	for _, tc := range []struct{ line, err string }{
		{`{"protocol":"pkie-verify/1","backend":"openssl","library":"OpenSSL 3.0.19"}`, ""},
		{`{"protocol":"pkie-verify/2","backend":"openssl"}`, `speaks "pkie-verify/2"`},
		{`{"protocol":"pkie-verify/1"}`, "names no back end"},
		{`hello`, "not JSON"},
	} {
		_, err := DecodeHello([]byte(tc.line))
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: got %v, want %q", tc.line, err, tc.err)
		}
	}
}

func TestEncodeRequest(t *testing.T) {
	b, err := EncodeRequest(9, &Request{Roots: [][]byte{{1, 2}}, Chain: [][]byte{{3}}, Host: "a.test", Time: time.Unix(1763856000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":9,"roots":["AQI="],"chain":["Aw=="],"host":"a.test","time":1763856000,"purpose":"server"}` + "\n"
	if string(b) != want {
		t.Errorf("got %s want %s", b, want)
	}
}

func TestWireHost(t *testing.T) {
	for in, want := range map[string]string{"[::1]": "::1", "[127.0.0.1]": "127.0.0.1", "::1": "::1", "[www.a.test]": "[www.a.test]", "www.a.test": "www.a.test", "[]": "[]"} {
		if got := WireHost(in); got != want {
			t.Errorf("WireHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzDecodeAnswer: whatever a helper writes, the decoder returns a
// verdict only when it is consistent, and never panics.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add([]byte(`{"id":1,"valid":true,"code":"ok","reason":"ok","depth":3,"phases":{"roots_ns":5,"chain_ns":6,"verify_ns":7,"hostname_ns":8}}`))
	f.Add([]byte(`{"id":1,"valid":false,"code":"bad_signature","reason":"certificate signature failure (depth 0)","phases":{"roots_ns":5,"chain_ns":6,"verify_ns":7,"hostname_ns":0}}`))
	f.Add([]byte(`{"id":1,"error":"no roots"}`))
	f.Add([]byte(`{"protocol":"pkie-verify/1","backend":"webpki","library":"rustls-webpki 0.103"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		DecodeHello(line)
		res, err := DecodeAnswer(line, 1)
		if err != nil {
			if res != (Result{}) {
				t.Fatalf("an error came with a verdict: %+v", res)
			}
			return
		}
		if res.Valid != (res.Code == OK) || !res.Code.Known() || (res.Valid && res.Depth < 1) {
			t.Fatalf("inconsistent verdict accepted: %+v", res)
		}
		if res.Phases.Roots < 0 || res.Phases.Chain < 0 || res.Phases.Verify < 0 || res.Phases.Hostname < 0 || len(res.Reason) > maxReason+len("…") {
			t.Fatalf("out-of-range answer accepted: %+v", res)
		}
	})
}
