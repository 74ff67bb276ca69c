package oldctlog

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/option"
)

func TestServeOptionsValidate(t *testing.T) {
	ok := ServeOptions{BuildInterval: time.Minute, HandlerOptions: HandlerOptions{MaxInFlight: 64, MaxAddChain: 64, BodyTimeout: time.Minute}}
	for _, tt := range []struct {
		name   string
		edit   func(*ServeOptions)
		fields []string // nil: valid
	}{
		{"defaults", func(*ServeOptions) {}, nil},
		{"zero bounds take the defaults", func(o *ServeOptions) { o.MaxInFlight, o.MaxAddChain, o.MaxPerClient = 0, 0, 0 }, nil},
		{"per-client share", func(o *ServeOptions) { o.MaxPerClient = 4 }, nil},
		{"zero interval", func(o *ServeOptions) { o.BuildInterval = 0 }, []string{"BuildInterval", "BodyTimeout"}},
		{"negative body timeout", func(o *ServeOptions) { o.BodyTimeout = -time.Second }, []string{"BuildInterval", "BodyTimeout"}},
		{"zero body timeout", func(o *ServeOptions) { o.BodyTimeout = 0 }, []string{"BuildInterval", "BodyTimeout"}},
		{"negative in flight", func(o *ServeOptions) { o.MaxInFlight = -1 }, []string{"MaxInFlight", "MaxAddChain", "MaxPerClient"}},
		{"negative add-chain", func(o *ServeOptions) { o.MaxAddChain = -1 }, []string{"MaxInFlight", "MaxAddChain", "MaxPerClient"}},
		{"negative per client", func(o *ServeOptions) { o.MaxPerClient = -1 }, []string{"MaxInFlight", "MaxAddChain", "MaxPerClient"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			err := o.Validate()
			var oe *option.Error
			switch {
			case tt.fields == nil && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.fields == nil:
			case !errors.As(err, &oe):
				t.Fatalf("Validate() = %v, want an *option.Error", err)
			case strings.Join(oe.Fields, ",") != strings.Join(tt.fields, ",") || !strings.HasPrefix(err.Error(), "ctlog: "+tt.fields[0]):
				t.Errorf("Validate() = %q (fields %v), want fields %v", err, oe.Fields, tt.fields)
			}
		})
	}
}
