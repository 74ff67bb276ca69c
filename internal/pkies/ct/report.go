package ct

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/sctpolicy"
)

// Report is what CheckSCTs found about one certificate's SCTs, as "pkie ct
// check --json" prints it.
type Report struct {
	Certificate string      `json:"certificate"` // the leaf's subject
	SHA256      string      `json:"sha256"`      // of the leaf's DER
	LogList     string      `json:"log_list"`
	Policy      string      `json:"policy"`
	Compliant   bool        `json:"compliant"`
	Reason      string      `json:"reason"`
	SCTs        []SCTReport `json:"scts"`
	// SourceErrors are the places SCTs could not be read from (a
	// malformed list, an OCSP response for another certificate).
	SourceErrors []string `json:"source_errors,omitempty"`
	// Contradicted is set when a log's signed tree holds another entry
	// where one of the SCTs says its entry is.
	Contradicted bool `json:"contradicted,omitempty"`
}

// SCTReport is one SCT.
type SCTReport struct {
	Source    string           `json:"source"` // embedded, tls, ocsp
	LogID     string           `json:"log_id"` // hex
	Log       string           `json:"log,omitempty"`
	Operator  string           `json:"operator,omitempty"`
	LogState  string           `json:"log_state,omitempty"`
	Listed    bool             `json:"listed"`
	Time      time.Time        `json:"time"`
	Valid     bool             `json:"valid"`
	Error     string           `json:"error,omitempty"` // why not valid
	Counted   bool             `json:"counted"`         // the policy counted it
	Inclusion *InclusionReport `json:"inclusion,omitempty"`
}

// InclusionReport is what the SCT's log said about its entry.
type InclusionReport struct {
	Status         string    `json:"status"` // included, promise, unknown, fail
	LeafIndex      uint64    `json:"leaf_index,omitempty"`
	TreeSize       uint64    `json:"tree_size,omitempty"`
	CheckpointTime time.Time `json:"checkpoint_time,omitzero"`
	Detail         string    `json:"detail"`
}

// CheckInput is what the command checks.
type CheckInput struct {
	Leaf, Issuer *x509.Certificate
	TLS          [][]byte // the TLS extension's SCTs
	OCSP         []byte
	List         *loglist.List
	Policy       sctpolicy.Policy
	Inclusion    *ctinclusion.Fetcher // nil: do not ask the logs
	// Witnesses, when set, must have cosigned (to their quorum) each
	// static-ct-api checkpoint an inclusion rests on.
	Witnesses *ctinclusion.Witnesses
	Now       time.Time
}

// CheckSCTs collects the leaf's SCTs, verifies each against the list,
// applies the policy and, with a Fetcher, asks each valid SCT's log for
// its entry.
func CheckSCTs(ctx context.Context, in CheckInput) *Report {
	sum := sha256.Sum256(in.Leaf.Raw)
	r := &Report{Certificate: in.Leaf.Subject.String(), SHA256: hex.EncodeToString(sum[:]), LogList: in.List.Source}
	scts, errs := sct.Collect(in.Leaf, in.TLS, in.OCSP)
	for _, err := range errs {
		r.SourceErrors = append(r.SourceErrors, err.Error())
	}
	checked := make([]sctpolicy.Checked, len(scts))
	entries := make([]*sct.Entry, len(scts))
	for i, s := range scts {
		c := sctpolicy.Checked{SCT: s, Log: in.List.Lookup(s.LogID)}
		out := SCTReport{Source: s.Source.String(), LogID: hex.EncodeToString(s.LogID[:]), Time: s.Time()}
		if c.Log == nil {
			c.Err = errors.New("its log is not in the log list")
		} else {
			out.Listed, out.Log, out.Operator, out.LogState = true, c.Log.Name(), c.Log.OperatorAt(s.Time()), string(c.Log.State)
			e, err := sct.EntryFor(s, in.Leaf, in.Issuer)
			if err == nil {
				entries[i] = e
				err = sct.Verify(s, e, c.Log.Key)
			}
			c.Err = err
		}
		out.Valid = c.Err == nil
		if c.Err != nil {
			out.Error = c.Err.Error()
		}
		checked[i] = c
		r.SCTs = append(r.SCTs, out)
	}
	res := in.Policy.Evaluate(in.Leaf, checked, in.Now)
	r.Policy, r.Compliant, r.Reason = res.Policy, res.Compliant, res.Reason
	for _, i := range res.Counted {
		if i >= 0 && i < len(r.SCTs) {
			r.SCTs[i].Counted = true
		}
	}
	if in.Inclusion == nil {
		return r
	}
	for i, s := range scts {
		if !r.SCTs[i].Valid {
			continue
		}
		inc := inclusionReport(ctx, in.Inclusion, in.Witnesses, checked[i].Log, s, entries[i].LeafHash(s), in.Now)
		if inc.Status == "fail" {
			r.Contradicted = true
		}
		r.SCTs[i].Inclusion = inc
	}
	return r
}

// inclusionReport asks log for s's entry and says what the answer means. A
// lookup that failed is unknown, never fail: only the log's signature on
// a tree that holds another entry, or that leaves the entry out after the
// log's maximum merge delay, is evidence against the SCT.
func inclusionReport(ctx context.Context, f *ctinclusion.Fetcher, w *ctinclusion.Witnesses, log *loglist.Log, s *sct.SCT, leafHash [32]byte, now time.Time) *InclusionReport {
	out := &InclusionReport{}
	deadline := s.Time().Add(log.MMD)
	e, err := f.Fetch(ctx, log, s, leafHash)
	var mismatch *ctinclusion.MismatchError
	switch {
	case errors.As(err, &mismatch):
		out.Status, out.LeafIndex, out.TreeSize = "fail", mismatch.LeafIndex, mismatch.TreeSize
		out.Detail = fmt.Sprintf("log %s signed a tree of %d entries holding another entry at the SCT's leaf index %d", log.Name(), mismatch.TreeSize, mismatch.LeafIndex)
		return out
	case err != nil || e == nil:
		out.Status = "unknown"
		out.Detail = fmt.Sprintf("could not ask log %s: %v", log.Name(), printable(fmt.Sprint(err)))
		return out
	}
	res, err := ctinclusion.VerifyWith(e, log, leafHash, ctinclusion.VerifyOptions{Witnesses: w})
	if err != nil {
		out.Status, out.Detail = "unknown", fmt.Sprintf("log %s's answer does not verify: %v", log.Name(), printable(err.Error()))
		return out
	}
	out.LeafIndex, out.TreeSize, out.CheckpointTime = e.LeafIndex, res.TreeSize, res.CheckpointTime
	switch ctinclusion.Judge(res, log, s.Time(), now) {
	case ctinclusion.Shown:
		out.Status = "included"
		out.Detail = fmt.Sprintf("in log %s's checkpoint of %d entries, at index %d", log.Name(), res.TreeSize, e.LeafIndex)
	case ctinclusion.Broken:
		out.Status = "fail"
		out.Detail = fmt.Sprintf("log %s signed a checkpoint of %d entries at %s, after its maximum merge delay, without the SCT's entry at index %d",
			log.Name(), res.TreeSize, res.CheckpointTime.UTC().Format(time.RFC3339), e.LeafIndex)
	case ctinclusion.Promised:
		out.Status = "promise"
		out.Detail = fmt.Sprintf("promise: not in log %s's checkpoint of %d entries; the log has until %s (its maximum merge delay of %s)",
			log.Name(), res.TreeSize, deadline.UTC().Format(time.RFC3339), log.MMD)
	default:
		out.Status = "unknown"
		if res.Status == ctinclusion.NotYet {
			out.Detail = fmt.Sprintf("not in log %s's latest checkpoint (%d entries, signed %s), past its maximum merge delay", log.Name(), res.TreeSize,
				res.CheckpointTime.UTC().Format(time.RFC3339))
		} else {
			out.Detail = fmt.Sprintf("log %s: %s: %s", log.Name(), res.Status, printable(e.Message))
		}
	}
	return out
}
