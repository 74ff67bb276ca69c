package roots

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pkie/pkie/internal/scan"
)

// rawRecord is a scan record with its chain left as base64 text: the form
// the loader works on, so that a chain seen a thousand times is decoded
// and verified once.
type rawRecord struct {
	rank    int
	domain  []byte
	vantage []byte
	time    time.Time
	errMsg  []byte
	chain   [][]byte // base64 text of each certificate
}

// parseRecord parses one scan-file line. The scanner's own output takes a
// fast path that slices the line instead of decoding it; anything else
// (escapes, unknown keys, odd numbers) goes through encoding/json, so the
// two agree on every line the fast path accepts (FuzzParseRecord checks).
func parseRecord(line []byte) (rawRecord, error) {
	if r, ok := parseFast(line); ok {
		if r.check() == nil {
			return r, nil
		}
	}
	rec, err := scan.ParseRecord(line)
	if err != nil {
		return rawRecord{}, err
	}
	r := rawRecord{rank: rec.Rank, domain: []byte(rec.Domain), vantage: []byte(rec.Vantage), time: rec.Time, errMsg: []byte(rec.Error)}
	for _, c := range rec.Chain {
		r.chain = append(r.chain, []byte(base64.StdEncoding.EncodeToString(c)))
	}
	return r, nil
}

// check mirrors scan.Record's checks.
func (r *rawRecord) check() error {
	if len(r.domain) == 0 {
		return errors.New("scan record has no domain")
	}
	if len(r.errMsg) == 0 && len(r.chain) == 0 {
		return errors.New("scan record has neither a chain nor an error")
	}
	for i, c := range r.chain {
		if len(c) == 0 {
			return fmt.Errorf("scan record chain[%d] is empty", i)
		}
	}
	return nil
}

// fastParser walks a flat JSON object: keys, and values that are strings
// without escapes, integers, null, or arrays of such strings. It reports
// !ok for anything else, leaving it to encoding/json.
type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) eat(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string with no escapes, control or non-ASCII bytes.
func (p *fastParser) str() ([]byte, bool) {
	s, ok := p.rawStr()
	if !ok {
		return nil, false
	}
	for _, c := range s {
		if c < 0x20 || c >= 0x80 {
			return nil, false
		}
	}
	return s, true
}

// rawStr reads a string with no escapes, leaving its bytes unchecked but
// for CR and LF: for base64, whose decoder rejects whatever encoding/json
// would have (other control bytes) or would have turned into U+FFFD
// (invalid UTF-8) and then failed to decode all the same. The decoder
// skips CR and LF, which encoding/json refuses inside a string.
func (p *fastParser) rawStr() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	j := bytes.IndexByte(p.b[p.i:], '"')
	if j < 0 {
		return nil, false
	}
	s := p.b[p.i : p.i+j]
	if bytes.IndexByte(s, '\\') >= 0 || bytes.IndexAny(s, "\r\n") >= 0 {
		return nil, false
	}
	p.i += j + 1
	return s, true
}

func (p *fastParser) null() bool {
	p.ws()
	if bytes.HasPrefix(p.b[p.i:], []byte("null")) {
		p.i += 4
		return true
	}
	return false
}

func (p *fastParser) int() (int, bool) {
	p.ws()
	j := p.i
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	k := j
	for k < len(p.b) && p.b[k] >= '0' && p.b[k] <= '9' {
		k++
	}
	if k == j || (p.b[j] == '0' && k-j > 1) || k-j > 18 {
		return 0, false
	}
	if k < len(p.b) && (p.b[k] == '.' || p.b[k] == 'e' || p.b[k] == 'E') {
		return 0, false
	}
	n, err := strconv.Atoi(string(p.b[p.i:k]))
	if err != nil {
		return 0, false
	}
	p.i = k
	return n, true
}

func parseFast(line []byte) (r rawRecord, ok bool) {
	p := &fastParser{b: line}
	if !p.eat('{') {
		return r, false
	}
	if p.eat('}') {
		return r, p.end()
	}
	for {
		key, ok := p.str()
		if !ok || !p.eat(':') {
			return r, false
		}
		switch string(key) {
		case "rank", "port", "attempts":
			if p.null() {
				break // null leaves a number as it was, as in encoding/json
			}
			n, ok := p.int()
			if !ok {
				return r, false
			}
			if string(key) == "rank" {
				r.rank = n
			}
		case "domain", "vantage", "error", "ip":
			if p.null() {
				break
			}
			s, ok := p.str()
			if !ok {
				return r, false
			}
			switch string(key) {
			case "domain":
				r.domain = s
			case "vantage":
				r.vantage = s
			case "error":
				r.errMsg = s
			}
		case "time":
			if p.null() {
				break
			}
			s, ok := p.str()
			if !ok {
				return r, false
			}
			var t time.Time
			if t.UnmarshalText(s) != nil {
				return r, false
			}
			r.time = t
		case "chain":
			r.chain = nil
			if p.null() {
				break
			}
			if !p.eat('[') {
				return r, false
			}
			if !p.eat(']') {
				for {
					s, ok := p.rawStr()
					if !ok {
						return r, false
					}
					r.chain = append(r.chain, s)
					if p.eat(']') {
						break
					}
					if !p.eat(',') {
						return r, false
					}
				}
			}
		default:
			return r, false
		}
		if p.eat('}') {
			return r, p.end()
		}
		if !p.eat(',') {
			return r, false
		}
	}
}

func (p *fastParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}
