package verify

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/option"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     Options
		field string // "" when valid
	}{
		{"all by default", Options{}, ""},
		{"every one", Options{Names: Names, Timeout: time.Second}, ""},
		{"one", Options{Names: []string{"openssl"}}, ""},
		{"empty list", Options{Names: []string{}}, "Names"},
		{"unknown", Options{Names: []string{"go", "boringssl"}}, "Names"},
		{"twice", Options{Names: []string{"go", "webpki", "go"}}, "Names"},
		{"negative timeout", Options{Timeout: -time.Second}, "Timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var oe *option.Error
			if !errors.As(err, &oe) || !slices.Contains(oe.Fields, tc.field) {
				t.Fatalf("Validate = %v, want an *option.Error about %s", err, tc.field)
			}
		})
	}
}
