package replay

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSONLWriter writes flows as pkie's JSON lines: one Flow object per line,
// its fields named by Flow's JSON tags (docs/formats/notary-and-tools.md, "Flow traces").
type JSONLWriter struct {
	w   *bufio.Writer
	enc *json.Encoder
}

// NewJSONLWriter returns a writer to w. Call Flush when done.
func NewJSONLWriter(w io.Writer) *JSONLWriter {
	bw := bufio.NewWriter(w)
	return &JSONLWriter{w: bw, enc: json.NewEncoder(bw)}
}

// Write appends one flow.
func (w *JSONLWriter) Write(f Flow) error {
	if err := w.enc.Encode(&f); err != nil {
		return fmt.Errorf("replay: writing flow: %w", err)
	}
	return nil
}

// Flush writes out what is buffered.
func (w *JSONLWriter) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("replay: writing flows: %w", err)
	}
	return nil
}

// JSONLReader reads pkie's JSON lines. Its flows were selected when they
// were written, so it keeps every well-formed one whatever the ports.
type JSONLReader struct {
	sc    *bufio.Scanner
	line  int64
	stats Stats
}

// NewJSONLReader returns a reader of r; lines longer than MaxLine are
// malformed.
func NewJSONLReader(r io.Reader) *JSONLReader {
	return &JSONLReader{sc: newLineScanner(r)}
}

func newLineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLine)
	return sc
}

// Next returns the next well-formed flow.
func (r *JSONLReader) Next() (Flow, error) {
	for {
		line, err := nextLine(r.sc, &r.line, &r.stats)
		if err != nil {
			return Flow{}, err
		}
		if len(line) == 0 {
			continue
		}
		var f Flow
		if err := json.Unmarshal(line, &f); err != nil {
			r.stats.malformed(r.line, err)
			continue
		}
		if err := f.check(); err != nil {
			r.stats.malformed(r.line, err)
			continue
		}
		r.stats.Read++
		r.stats.kept(f)
		return f, nil
	}
}

// Stats reports what has been read so far.
func (r *JSONLReader) Stats() Stats { return r.stats }

// check refuses flows the later stages could not use.
func (f Flow) check() error {
	switch {
	case f.Start.IsZero():
		return errors.New("no start time")
	case !f.Server.IsValid():
		return errors.New("no server address")
	case f.Duration < 0:
		return errors.New("negative duration")
	}
	return nil
}

// nextLine returns the next line, trimmed of a trailing CR. A line longer
// than MaxLine is counted malformed and ends the trace with an error: a
// bufio.Scanner cannot resume past it, and such a line means the file is
// not a text trace at all.
func nextLine(sc *bufio.Scanner, n *int64, st *Stats) ([]byte, error) {
	if sc.Scan() {
		*n++
		b := sc.Bytes()
		if len(b) > 0 && b[len(b)-1] == '\r' {
			b = b[:len(b)-1]
		}
		return b, nil
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			*n++
			st.malformed(*n, fmt.Errorf("line longer than %d bytes", MaxLine))
			return nil, fmt.Errorf("replay: line %d: longer than %d bytes: %w", *n, MaxLine, err)
		}
		return nil, fmt.Errorf("replay: reading trace: %w", err)
	}
	return nil, io.EOF
}
