package scan

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"time"
)

// Record is one line of a scan file: what one vantage saw of one site.
// Chain holds the DER certificates exactly as the server sent them, leaf
// first (base64 in JSON). Error is empty when the handshake succeeded.
type Record struct {
	Rank     int       `json:"rank"`
	Domain   string    `json:"domain"`
	IP       string    `json:"ip"`
	Port     int       `json:"port"`
	Time     time.Time `json:"time"`
	Vantage  string    `json:"vantage"`
	Chain    [][]byte  `json:"chain"`
	Error    string    `json:"error"`
	Attempts int       `json:"attempts,omitempty"`
}

// OK reports whether the site answered with a certificate chain.
func (r *Record) OK() bool { return r.Error == "" && len(r.Chain) > 0 }

// MaxRecordLine bounds one scan-file line (16 certificates of 64 KiB in
// base64 and change); a longer line is reported as malformed and skipped.
const MaxRecordLine = 2 << 20

// ParseRecord decodes and checks one scan-file line.
func ParseRecord(line []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return Record{}, fmt.Errorf("not a scan record: %w", err)
	}
	if err := r.check(); err != nil {
		return Record{}, err
	}
	return r, nil
}

func (r *Record) check() error {
	if r.Domain == "" {
		return errors.New("scan record has no domain")
	}
	if r.Error == "" && len(r.Chain) == 0 {
		return errors.New("scan record has neither a chain nor an error")
	}
	for i, c := range r.Chain {
		if len(c) == 0 {
			return fmt.Errorf("scan record chain[%d] is empty", i)
		}
	}
	return nil
}

// Line is one line of a scan file as read by ReadLines.
type Line struct {
	Bytes []byte // without the newline; valid until the callback returns
	No    int    // 1-based line number
	End   int64  // file offset just past this line (and its newline)
	// Terminated is false for a last line with no newline: a record the
	// scanner may have been killed in the middle of writing.
	Terminated bool
	TooLong    bool // longer than MaxRecordLine; Bytes holds its start
}

// ReadLines calls fn for every line of r, in order, without holding more
// than one line. It stops at the first error fn returns.
func ReadLines(r io.Reader, fn func(Line) error) error {
	br := bufio.NewReaderSize(r, 256<<10)
	var off int64
	no := 0
	for {
		b, tooLong, n, err := readRecordLine(br)
		if n == 0 && errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		no++
		off += n
		if ferr := fn(Line{Bytes: b, No: no, End: off, Terminated: err == nil, TooLong: tooLong}); ferr != nil {
			return ferr
		}
		if err != nil {
			return nil
		}
	}
}

// readRecordLine is readLine that also counts the bytes consumed.
func readRecordLine(r *bufio.Reader) (line []byte, tooLong bool, n int64, err error) {
	var buf []byte
	for {
		frag, err := r.ReadSlice('\n')
		n += int64(len(frag))
		if len(buf)+len(frag) > MaxRecordLine+1 {
			tooLong = true
			if len(buf) < MaxRecordLine {
				buf = append(buf, frag[:MaxRecordLine-len(buf)]...)
			}
		} else if buf == nil && err == nil {
			// Common case: the whole line is in the reader's buffer.
			return frag[:len(frag)-1], false, n, nil
		} else {
			buf = append(buf, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(buf) > 0 && buf[len(buf)-1] == '\n' {
			buf = buf[:len(buf)-1]
		}
		return buf, tooLong, n, err
	}
}

// LoadStats says what reading a scan file found.
type LoadStats struct {
	Records   int // whole, well-formed records
	Malformed int // lines skipped as not records (line numbers in Problems)
	// Truncated is set when the file ends in a partial record (the scanner
	// was stopped mid-write); it was ignored.
	Truncated bool
	Problems  []string // the first few problems, with line numbers
}

const maxProblems = 20

// Note records a problem, keeping only the first few.
func (s *LoadStats) Note(format string, a ...any) {
	if len(s.Problems) < maxProblems {
		s.Problems = append(s.Problems, fmt.Sprintf(format, a...))
	}
}

// ReadRecords calls fn for every well-formed record in r. Malformed lines
// are counted and skipped; a partial last record (no newline and not
// parseable) is ignored and flagged in the stats.
func ReadRecords(r io.Reader, fn func(Record) error) (LoadStats, error) {
	var st LoadStats
	err := ReadLines(r, func(l Line) error {
		if len(l.Bytes) == 0 && !l.TooLong {
			return nil
		}
		if l.TooLong {
			st.Malformed++
			st.Note("line %d: longer than %d bytes", l.No, MaxRecordLine)
			return nil
		}
		rec, err := ParseRecord(l.Bytes)
		if err != nil {
			if !l.Terminated {
				st.Truncated = true
				st.Note("line %d: partial last record ignored (scan stopped mid-write?)", l.No)
				return nil
			}
			st.Malformed++
			st.Note("line %d: %v", l.No, err)
			return nil
		}
		st.Records++
		return fn(rec)
	})
	return st, err
}

// DoneSet remembers which domains a scan file already holds, in 8 bytes
// each (a 64-bit hash), so resuming a million-site scan costs little memory.
// Two domains colliding in 64 bits (odds about 3e-8 at a million) would make
// a resumed scan skip one site; that is the price of flat memory.
type DoneSet struct {
	seed maphash.Seed
	m    map[uint64]struct{}
}

// NewDoneSet returns an empty set.
func NewDoneSet() *DoneSet {
	return &DoneSet{seed: maphash.MakeSeed(), m: map[uint64]struct{}{}}
}

// Add records domain.
func (d *DoneSet) Add(domain string) { d.m[maphash.String(d.seed, domain)] = struct{}{} }

// Has reports whether domain was recorded.
func (d *DoneSet) Has(domain string) bool {
	_, ok := d.m[maphash.String(d.seed, domain)]
	return ok
}

// Len returns the number of domains recorded.
func (d *DoneSet) Len() int { return len(d.m) }

// OpenResume opens (creating if need be) a scan file for appending and
// returns the domains it already records. If the file ends in a partial
// record, it is cut back to the end of the last whole one, so that records
// appended by the resumed scan start on a line of their own. With
// retryFailed, sites recorded with an error are not counted as done, so
// they are scanned again (the loader prefers the later, successful record).
func OpenResume(path string, retryFailed bool) (*os.File, *DoneSet, LoadStats, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, LoadStats{}, err
	}
	done := NewDoneSet()
	var st LoadStats
	var keep int64  // offset just past the last whole line
	var needNL bool // the last record is whole but lacks its newline
	err = ReadLines(f, func(l Line) error {
		if len(l.Bytes) == 0 && !l.TooLong {
			if l.Terminated {
				keep = l.End
			}
			return nil
		}
		var rec Record
		var perr error
		if l.TooLong {
			perr = fmt.Errorf("longer than %d bytes", MaxRecordLine)
		} else {
			rec, perr = ParseRecord(l.Bytes)
		}
		switch {
		case perr != nil && !l.Terminated:
			st.Truncated = true
			st.Note("line %d: partial last record dropped (scan stopped mid-write?)", l.No)
			return nil
		case perr != nil:
			st.Malformed++
			st.Note("line %d: %v", l.No, perr)
		default:
			st.Records++
			if rec.OK() || !retryFailed {
				done.Add(rec.Domain)
			}
			needNL = !l.Terminated
		}
		keep = l.End
		return nil
	})
	if err == nil {
		err = f.Truncate(keep)
	}
	if err == nil {
		_, err = f.Seek(keep, io.SeekStart)
	}
	if err == nil && needNL {
		_, err = f.Write([]byte{'\n'})
	}
	if err != nil {
		f.Close()
		return nil, nil, st, fmt.Errorf("resuming %s: %w", path, err)
	}
	return f, done, st, nil
}
