// Package conf holds what the built-in enhancements' JSON configurations
// share: durations written as Go duration strings and strict decoding.
package conf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("90s", "1h30m"), so that configurations stay legible.
type Duration time.Duration

// MarshalJSON renders d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON parses a duration string. Numbers are refused: a bare 3600
// would be nanoseconds to Go and seconds to most people.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"1h30m\", got %s", truncate(b))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Decode decodes one JSON object into v, refusing unknown fields and
// trailing data: a misspelt key in a trust configuration must not silently
// fall back to a default.
func Decode(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("empty configuration; want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the configuration's JSON object")
	}
	return nil
}

// JSON marshals v, which must be a configuration struct of this module
// (it cannot fail for those).
func JSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("conf: %T does not marshal: %v", v, err))
	}
	return b
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
