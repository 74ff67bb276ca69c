package loglist

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/certificate-transparency-go/loglist3"
)

// Write returns a v3 JSON log list holding logs, published at ts, that
// Parse and loglist3 read back: one operator entry per distinct
// Log.Operator (in order of first appearance, with an empty email list),
// RFC 6962 logs under "logs" and static-ct-api logs under "tiled_logs".
// It is for lists of one's own logs: tests, the demo, a deployment
// running its own logs. A log needs Operator, Kind, URL (and
// MonitoringURL when Static) and SPKI or Key; its ID is computed from the
// key. A State is written with StateSince as its timestamp (a ReadOnly
// log with its final tree head).
func Write(logs []*Log, ts time.Time) ([]byte, error) {
	ll := loglist3.LogList{Version: "pkie-1", LogListTimestamp: ts.UTC()}
	ops := map[string]*loglist3.Operator{}
	for i, l := range logs {
		if l == nil {
			return nil, fmt.Errorf("loglist: write: log %d is nil", i)
		}
		if l.Operator == "" {
			return nil, fmt.Errorf("loglist: write: log %s has no operator", l.Name())
		}
		spki := l.SPKI
		if len(spki) == 0 {
			if l.Key == nil {
				return nil, fmt.Errorf("loglist: write: log %s has neither SPKI nor Key", l.Name())
			}
			var err error
			if spki, err = x509.MarshalPKIXPublicKey(l.Key); err != nil {
				return nil, fmt.Errorf("loglist: write: log %s: %w", l.Name(), err)
			}
		}
		id := sha256.Sum256(spki)
		op := ops[l.Operator]
		if op == nil {
			op = &loglist3.Operator{Name: l.Operator, Email: []string{}, Logs: []*loglist3.Log{}, TiledLogs: []*loglist3.TiledLog{}}
			ops[l.Operator] = op
			ll.Operators = append(ll.Operators, op)
		}
		st, err := states(l)
		if err != nil {
			return nil, fmt.Errorf("loglist: write: log %s: %w", l.Name(), err)
		}
		var ti *loglist3.TemporalInterval
		if !l.NotAfterStart.IsZero() || !l.NotAfterEnd.IsZero() {
			ti = &loglist3.TemporalInterval{StartInclusive: l.NotAfterStart.UTC(), EndExclusive: l.NotAfterEnd.UTC()}
		}
		var prev []*loglist3.PreviousOperator
		for _, p := range l.PreviousOperators {
			prev = append(prev, &loglist3.PreviousOperator{Name: p.Name, EndTime: p.End.UTC()})
		}
		mmd := int32(l.MMD / time.Second)
		switch l.Kind {
		case RFC6962:
			op.Logs = append(op.Logs, &loglist3.Log{Description: l.Description, LogID: id[:], Key: spki, URL: l.URL,
				MMD: mmd, State: st, TemporalInterval: ti, PreviousOperators: prev})
		case Static:
			op.TiledLogs = append(op.TiledLogs, &loglist3.TiledLog{Description: l.Description, LogID: id[:], Key: spki,
				SubmissionURL: l.URL, MonitoringURL: l.MonitoringURL, MMD: mmd, State: st, TemporalInterval: ti, PreviousOperators: prev})
		default:
			return nil, fmt.Errorf("loglist: write: log %s has kind %q; want %q or %q", l.Name(), l.Kind, RFC6962, Static)
		}
	}
	out, err := json.MarshalIndent(&ll, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("loglist: write: %w", err)
	}
	// What Write returns, Parse must accept: a list that reads back
	// differently (a bad key, a duplicate ID) is an error here, not at the
	// client that loads it.
	if _, err := Parse(out); err != nil {
		return nil, fmt.Errorf("loglist: write: the list does not read back: %w", err)
	}
	return append(out, '\n'), nil
}

func states(l *Log) (*loglist3.LogStates, error) {
	ls := &loglist3.LogState{Timestamp: l.StateSince.UTC()}
	switch l.State {
	case "":
		return nil, nil
	case Pending:
		return &loglist3.LogStates{Pending: ls}, nil
	case Qualified:
		return &loglist3.LogStates{Qualified: ls}, nil
	case Usable:
		return &loglist3.LogStates{Usable: ls}, nil
	case ReadOnly:
		if l.FinalTreeSize > 1<<62 {
			return nil, errors.New("final tree size out of range")
		}
		return &loglist3.LogStates{ReadOnly: &loglist3.ReadOnlyLogState{LogState: *ls,
			FinalTreeHead: loglist3.TreeHead{SHA256RootHash: l.FinalRootHash[:], TreeSize: int64(l.FinalTreeSize)}}}, nil
	case Retired:
		return &loglist3.LogStates{Retired: ls}, nil
	case Rejected:
		return &loglist3.LogStates{Rejected: ls}, nil
	}
	return nil, fmt.Errorf("unknown state %q", l.State)
}
