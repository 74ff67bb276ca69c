package notary

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// FileHistorySeen is the HistoryMarker pkie notary serve keeps in a notary's
// data directory.
const FileHistorySeen = "history.seen"

// markHistory creates HistoryMarker, once, after an observation has been
// committed: from then on an empty history at start means a lost one.
func (n *Notary) markHistory() {
	if n.cfg.HistoryMarker == "" || n.marked.Load() {
		return
	}
	if err := writeMarker(n.cfg.HistoryMarker); err != nil {
		n.log.Warn("cannot mark the history as used; a later loss of it will go unnoticed", "err", err)
		return
	}
	n.marked.Store(true)
}

func writeMarker(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("this notary's history has held observations; see docs/operations/notary.md\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CheckHistory is run once at start. It reports whether the history is
// empty although this notary has recorded observations in it before (its
// HistoryMarker exists): the database was lost or replaced while the keys
// were kept. That is logged at error level and exported as the gauge
// pkie_notary_history_empty_at_start, since clients' --min-duration
// policies silently change meaning: every span the notary signs starts
// again from now. The notary keeps serving; an empty history is valid.
// A history that holds records marks itself (for notaries from before the
// marker existed).
func (n *Notary) CheckHistory(ctx context.Context) (lost bool, err error) {
	empty, err := n.cfg.History.Empty(ctx)
	if err != nil {
		return false, fmt.Errorf("notary: reading the history: %w", err)
	}
	seen := false
	if p := n.cfg.HistoryMarker; p != "" {
		_, err := os.Stat(p)
		switch {
		case err == nil:
			seen = true
		case !errors.Is(err, fs.ErrNotExist):
			return false, fmt.Errorf("notary: %w", err)
		}
	}
	switch {
	case empty && seen:
		n.metrics.historyEmpty.Set(1)
		n.log.Error("notary history is EMPTY, but this notary has recorded observations before: its database was lost or replaced. "+
			"Every span it signs starts again from now, so clients' --min-duration policies will not pass for a while. "+
			"Restore the database if you can; if the reset is intended, delete the marker file",
			"marker", n.cfg.HistoryMarker)
		return true, nil
	case empty:
		n.metrics.historyEmpty.Set(0)
		n.log.Info("notary history is empty: a new notary")
	default:
		n.metrics.historyEmpty.Set(0)
		n.marked.Store(seen)
		n.markHistory()
	}
	return false, nil
}
