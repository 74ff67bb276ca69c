package roots

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/scan"
)

// Input is one scan file to load.
type Input struct {
	Name string
	R    io.Reader
}

// LoadOptions configure Load.
type LoadOptions struct {
	Store    *Store
	Workers  int       // parallel parsers and verifiers (default GOMAXPROCS)
	Progress io.Writer // a status line every second, if set

	exact bool // tests: full x509.Verify for every distinct chain
}

// LoadStats say what loading found.
type LoadStats struct {
	Records   int      `json:"records"`             // whole, well-formed records
	Malformed int      `json:"malformed"`           // lines skipped
	Truncated []string `json:"truncated,omitempty"` // files ending in a partial record (ignored)
	Problems  []string `json:"problems,omitempty"`  // the first few, with file and line
	// Duplicates counts records for a (vantage, domain) already seen: a
	// resumed scan that retried failures. The answered record is kept, and
	// among those the later one.
	Duplicates    int   `json:"duplicates"`
	DistinctChain int   `json:"distinct_chains"`
	Verifications int64 `json:"verifications"` // full path buildings (x509.Verify) run
	// LeafChecks counts distinct chains decided by checking only the leaf
	// against the cached paths of its group (same intermediates, same
	// issuer name).
	LeafChecks int64 `json:"leaf_checks"`
}

// site is what the analysis needs of one (vantage, domain).
type site struct {
	key     string // vantage id (2 bytes) + domain
	rank    int32
	vantage uint16
	seq     int64 // file and line: later records replace earlier ones
	o       outcome
}

func (s *site) domain() string { return s.key[2:] }

// Data is a loaded set of scans with every site's chain verified.
type Data struct {
	Store    *Store
	Vantages []string
	Stats    LoadStats

	v     *verifier
	sites []site
}

type batch struct {
	file  int
	lines [][]byte
	nos   []int
	last  []bool // line is a file's unterminated last line
	buf   []byte
}

type item struct {
	s       site
	vantage string
	bad     string // problem text; s unused
	trunc   bool
}

const (
	batchBytes = 1 << 20
	batchLines = 4096
)

// newBatch sizes a batch for what it will hold, so that filling it does
// not copy the lines over and over as the buffer grows.
func newBatch(file int) *batch {
	return &batch{
		file:  file,
		lines: make([][]byte, 0, batchLines),
		nos:   make([]int, 0, batchLines),
		last:  make([]bool, 0, batchLines),
		buf:   make([]byte, 0, batchBytes+64<<10),
	}
}

// Load reads scan files, streaming, and verifies every answered site's
// chain against opts.Store. A file cut off mid-record loads up to its last
// whole record; malformed lines are counted and skipped.
func Load(ctx context.Context, inputs []Input, opts LoadOptions) (*Data, error) {
	if opts.Store == nil {
		return nil, fmt.Errorf("roots: no trust store")
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	d := &Data{Store: opts.Store, v: newVerifier(opts.Store)}
	d.v.exact = opts.exact
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	batches := make(chan *batch, 2*opts.Workers)
	results := make(chan []item, 2*opts.Workers)
	var readErr error
	var bytesRead int64
	var mu sync.Mutex // guards bytesRead for progress
	go func() {
		defer close(batches)
		for fi, in := range inputs {
			b := newBatch(fi)
			send := func() bool {
				if len(b.lines) == 0 {
					return true
				}
				select {
				case batches <- b:
				case <-ctx.Done():
					return false
				}
				b = newBatch(fi)
				return true
			}
			err := scan.ReadLines(in.R, func(l scan.Line) error {
				mu.Lock()
				bytesRead = l.End
				mu.Unlock()
				if l.TooLong {
					b.lines = append(b.lines, nil)
				} else {
					start := len(b.buf)
					b.buf = append(b.buf, l.Bytes...)
					b.lines = append(b.lines, b.buf[start:len(b.buf):len(b.buf)])
				}
				b.nos = append(b.nos, l.No)
				b.last = append(b.last, !l.Terminated)
				if len(b.buf) >= batchBytes || len(b.lines) >= batchLines {
					if !send() {
						return ctx.Err()
					}
				}
				return nil
			})
			if err != nil {
				readErr = fmt.Errorf("reading %s: %w", in.Name, err)
				return
			}
			if !send() {
				return
			}
		}
	}()

	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				select {
				case results <- d.work(b, inputs[b.file].Name):
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	index := map[string]int32{}
	vantages := map[string]uint16{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	var tooManyVantages bool
	for done := false; !done; {
		select {
		case items, ok := <-results:
			if !ok {
				done = true
				break
			}
			for i := range items {
				it := &items[i]
				switch {
				case it.trunc:
					d.Stats.Truncated = append(d.Stats.Truncated, it.bad)
					d.note(it.bad)
					continue
				case it.bad != "":
					d.Stats.Malformed++
					d.note(it.bad)
					continue
				}
				d.Stats.Records++
				vid, ok := vantages[it.vantage]
				if !ok {
					if len(vantages) == 1<<16-1 {
						tooManyVantages = true
						continue
					}
					vid = uint16(len(vantages))
					vantages[it.vantage] = vid
					d.Vantages = append(d.Vantages, it.vantage)
				}
				s := it.s
				s.vantage = vid
				var pre [2]byte
				binary.BigEndian.PutUint16(pre[:], vid)
				s.key = string(pre[:]) + s.key
				if j, dup := index[s.key]; dup {
					d.Stats.Duplicates++
					old := &d.sites[j]
					oldOK, newOK := old.o.status != StatusFailed, s.o.status != StatusFailed
					if (newOK && !oldOK) || (newOK == oldOK && s.seq > old.seq) {
						s.key = old.key
						*old = s
					}
					continue
				}
				index[s.key] = int32(len(d.sites))
				d.sites = append(d.sites, s)
			}
		case <-tick.C:
			if opts.Progress != nil {
				mu.Lock()
				n := bytesRead
				mu.Unlock()
				el := time.Since(start).Seconds()
				fmt.Fprintf(opts.Progress, "roots: %d records, %d chains verified in full + %d by leaf, %.0f MB/s\n",
					d.Stats.Records, d.v.verifs.Load(), d.v.leafOnly.Load(), float64(n)/1e6/el)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if readErr != nil {
		return nil, readErr
	}
	if tooManyVantages {
		return nil, fmt.Errorf("roots: more than %d vantages", 1<<16-1)
	}
	d.Stats.DistinctChain = int(d.v.nchains.Load())
	d.Stats.Verifications = d.v.verifs.Load()
	d.Stats.LeafChecks = d.v.leafOnly.Load()
	return d, ctx.Err()
}

func (d *Data) note(p string) {
	if len(d.Stats.Problems) < 20 {
		d.Stats.Problems = append(d.Stats.Problems, p)
	}
}

// work parses and verifies one batch.
func (d *Data) work(b *batch, name string) []item {
	out := make([]item, 0, len(b.lines))
	for i, line := range b.lines {
		no := b.nos[i]
		if line == nil {
			out = append(out, item{bad: fmt.Sprintf("%s:%d: longer than %d bytes", name, no, scan.MaxRecordLine)})
			continue
		}
		if len(line) == 0 {
			continue
		}
		r, err := parseRecord(line)
		if err != nil {
			if b.last[i] {
				out = append(out, item{trunc: true, bad: fmt.Sprintf("%s:%d: partial last record ignored (scan stopped mid-write?)", name, no)})
			} else {
				out = append(out, item{bad: fmt.Sprintf("%s:%d: %v", name, no, err)})
			}
			continue
		}
		o := outcome{status: StatusFailed, chain: -1}
		if len(r.errMsg) == 0 {
			o = d.v.verify(r.chain, r.time)
			if o.status == statusMalformed {
				out = append(out, item{bad: fmt.Sprintf("%s:%d: chain is not base64", name, no)})
				continue
			}
		}
		rank := int32(r.rank)
		if r.rank < 0 || r.rank > 1<<31-1 {
			rank = 0
		}
		out = append(out, item{
			vantage: string(r.vantage),
			s:       site{key: string(r.domain), rank: rank, seq: int64(b.file)<<40 | int64(no), o: o},
		})
	}
	return out
}
