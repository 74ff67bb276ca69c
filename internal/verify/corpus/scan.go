package corpus

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/scan"
	"github.com/pkie/pkie/internal/verify"
)

// ScanSource is the Source of cases read from a pkie scan file.
const ScanSource = "scan"

// Scan reads the records of a pkie scan file (internal/scan's JSON lines)
// as cases without an expectation: each chain as the site presented it,
// its domain as the host, verified at the time it was seen (now when the
// record has no time) against roots. What a corpus of real sites
// measures is the back ends' agreement, not their correctness. A record
// without a chain (the site failed) is skipped with its error.
func Scan(r io.Reader, roots [][]byte, now time.Time) (*Corpus, error) {
	if len(roots) == 0 {
		return nil, fmt.Errorf("corpus: scan: no trust anchors")
	}
	out := &Corpus{}
	st, err := scan.ReadRecords(r, func(rec scan.Record) error {
		id := ScanSource + "#" + rec.Domain
		if rec.Vantage != "" {
			id += "@" + rec.Vantage
		}
		if !rec.OK() {
			out.Skipped = append(out.Skipped, Skip{ID: id, Source: ScanSource, Reason: "no chain: " + scanErrorKind(rec.Error)})
			return nil
		}
		c := Case{ID: id, Source: ScanSource, Roots: roots, Chain: rec.Chain, Host: rec.Domain,
			Time: rec.Time, Purpose: verify.Server, Expect: Unknown,
			Note: fmt.Sprintf("rank %d, %s, seen %s", rec.Rank, rec.IP, rec.Time.UTC().Format(time.RFC3339))}
		if c.Time.IsZero() {
			c.Time = now
		}
		if reason := unaskable(&c); reason != "" {
			out.Skipped = append(out.Skipped, Skip{ID: id, Source: ScanSource, Reason: reason})
			return nil
		}
		out.Cases = append(out.Cases, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("corpus: reading scan file: %w", err)
	}
	if st.Malformed > 0 {
		out.Skipped = append(out.Skipped, Skip{ID: ScanSource, Source: ScanSource,
			Reason: fmt.Sprintf("%d malformed lines (%s)", st.Malformed, strings.Join(st.Problems, "; "))})
	}
	return out, nil
}

// scanErrorKind keeps the first words of a scan error, so skip reasons
// group.
func scanErrorKind(e string) string {
	if i := strings.IndexByte(e, ':'); i > 0 {
		return e[:i]
	}
	return trim(e, 60)
}
