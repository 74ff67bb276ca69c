package conf

import (
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	type cfg struct {
		Key    string   `json:"key"`
		MaxAge Duration `json:"max_age,omitzero"`
	}
	var c cfg
	if err := Decode([]byte(`{"key":"k","max_age":"1h30m"}`), &c); err != nil || c.Key != "k" || c.MaxAge.D() != 90*time.Minute {
		t.Fatalf("%+v %v", c, err)
	}
	for _, tc := range []struct{ in, err string }{
		{``, "empty configuration"},
		{`{"key":"k","max_age":3600}`, "must be a string"},
		{`{"key":"k","max_age":"an hour"}`, "invalid duration"},
		{`{"key":"k","maxage":"1h"}`, "unknown field"},
		{`{"key":"k"} {}`, "data after"},
	} {
		var c cfg
		if err := Decode([]byte(tc.in), &c); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Decode(%q) = %v, want %q", tc.in, err, tc.err)
		}
	}
	if got := string(JSON(cfg{Key: "k", MaxAge: Duration(time.Hour)})); got != `{"key":"k","max_age":"1h0m0s"}` {
		t.Errorf("JSON: %s", got)
	}
}
