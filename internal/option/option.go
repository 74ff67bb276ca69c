// Package option reports an invalid field of a library's Options so that a
// command can say it in its own words: the library names the field as Go
// spells it ("Hosts must be 1 to 254"), the command as its user typed it
// ("--hosts must be 1 to 254"). Validation then lives with the library
// that knows what a value means, and every front end reports it alike.
package option

import (
	"fmt"
	"regexp"
)

// Error is one invalid option.
type Error struct {
	// Pkg is the library's name, prefixing Error's text ("driver: …").
	Pkg string
	// Fields are the Options fields the problem is about, as Msg spells
	// them: the first is the one to change.
	Fields []string
	// Msg says what is wrong.
	Msg string
}

// Errorf returns an Error about fields, its message formatted.
func Errorf(pkg string, fields []string, format string, a ...any) *Error {
	return &Error{Pkg: pkg, Fields: fields, Msg: fmt.Sprintf(format, a...)}
}

func (e *Error) Error() string { return e.Pkg + ": " + e.Msg }

// Rename returns the message with each of Fields (whole words only)
// replaced by its name in names, as a command's flags name them; a field
// not in names keeps its Go name.
func (e *Error) Rename(names map[string]string) string {
	msg := e.Msg
	for _, f := range e.Fields {
		n, ok := names[f]
		if !ok {
			continue
		}
		re := regexp.MustCompile(`\b` + regexp.QuoteMeta(f) + `\b`)
		msg = re.ReplaceAllLiteralString(msg, n)
	}
	return msg
}
