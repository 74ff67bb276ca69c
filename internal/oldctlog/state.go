package oldctlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/transparency-dev/merkle/proof"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/ttpstate"
)

// StateFile, in the log directory, holds the last log checkpoint the log
// signed (package ttpstate, mode 0600), kept apart from the database so
// that a lost, truncated or rolled-back database is refused at Open
// instead of growing into a second history under the same key.
//
// Every commit of the log's tree writes it first (synced), inside the
// write transaction: the checkpoint being committed as "pending" beside the
// last committed one, which the database holds. The next commit's write,
// or Close, records the pending one as committed. A crash before the
// commit leaves a pending checkpoint the database does not hold; Open
// accepts a database at either, and refuses one behind the committed
// checkpoint or, when it reaches the pending size, not extending the
// pending one.
const StateFile = "log.state"

// ErrBehind is wrapped by the error of Open and of the audit check for a
// database that does not hold what the log last signed.
var ErrBehind = errors.New("ctlog: the database is behind the last signed checkpoint")

func (l *Log) statePath() string { return filepath.Join(l.dir, StateFile) }

// latestLogCheckpoint returns the newest signed log checkpoint in the
// database, or nil if there is none.
func latestLogCheckpoint(ctx context.Context, q querier) ([]byte, error) {
	var msg []byte
	err := q.QueryRowContext(ctx, `SELECT note FROM checkpoints WHERE kind = ? ORDER BY id DESC LIMIT 1`, kindLog).Scan(&msg)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ctlog: reading checkpoint: %w", err)
	}
	return msg, nil
}

// checkState refuses a database behind the state file, adopting the
// database's latest checkpoint when there is no state file yet (a log
// created before there was one).
func (l *Log) checkState(ctx context.Context, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	_, err := ttpstate.Read(l.statePath())
	if errors.Is(err, os.ErrNotExist) {
		latest, err := latestLogCheckpoint(ctx, l.db)
		if err != nil {
			return err
		}
		if latest == nil {
			return fmt.Errorf("%w: %s holds the log's key but neither %s nor %s records anything it signed: the database was lost or replaced. "+
				"Restore both from a backup; a log cannot start a second history under the same key (docs/operations/proofs.md)",
				ErrBehind, l.dir, StateFile, DBFile)
		}
		cp, err := ttpstate.Open(string(latest), l.verifier, l.origin)
		if err != nil {
			return fmt.Errorf("ctlog: the database's latest checkpoint: %w", err)
		}
		n, err := querySize(ctx, l.db)
		if err != nil {
			return err
		}
		if err := l.holds(ctx, l.db, n, cp); err != nil {
			return err
		}
		if err := ttpstate.Write(l.statePath(), &ttpstate.State{Checkpoint: string(latest)}); err != nil {
			return err
		}
		logf("ctlog: no %s yet (a log created before there was one): adopted the database's latest checkpoint as the last signed one", StateFile)
		return nil
	}
	if err != nil {
		return fmt.Errorf("ctlog: %w (it records what the log last signed: restore it; docs/operations/proofs.md)", err)
	}
	return l.CheckState(ctx)
}

// CheckState checks that the database holds the last checkpoint the log
// signed, as recorded in StateFile: at least as many entries, and a tree
// that extends it (the same root at the same size; a consistency proof
// computed from the stored hashes, verified against both roots, at a larger
// one). A database behind it is an error wrapping ErrBehind; a missing or
// unreadable state file is another error.
func (l *Log) CheckState(ctx context.Context) error {
	st, err := ttpstate.Read(l.statePath())
	if err != nil {
		return fmt.Errorf("ctlog: %w", err)
	}
	saved, err := ttpstate.Open(st.Checkpoint, l.verifier, l.origin)
	if err != nil {
		return fmt.Errorf("ctlog: %s: %w", StateFile, err)
	}
	var pending *checkpoint.Checkpoint
	if st.Pending != "" {
		if pending, err = ttpstate.Open(st.Pending, l.verifier, l.origin); err != nil {
			return fmt.Errorf("ctlog: %s (pending): %w", StateFile, err)
		}
	}
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("ctlog: %w", err)
	}
	defer tx.Rollback()
	n, err := querySize(ctx, tx)
	if err != nil {
		return err
	}
	if err := l.holds(ctx, tx, n, saved); err != nil {
		return err
	}
	if pending != nil && n >= pending.Size {
		return l.holds(ctx, tx, n, pending)
	}
	return nil
}

// holds checks that the stored tree of n leaves extends cp.
func (l *Log) holds(ctx context.Context, q querier, n uint64, cp *checkpoint.Checkpoint) error {
	when := cp.Time.UTC().Format(time.RFC3339)
	if n < cp.Size {
		return fmt.Errorf("%w: %s holds %d entries, but the log last signed a tree of %d (%s, %s); "+
			"refusing to sign a smaller tree under the same key. Restore the database (docs/operations/proofs.md)",
			ErrBehind, DBFile, n, cp.Size, when, StateFile)
	}
	r, err := compactRange(ctx, q, n)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBehind, err)
	}
	root, err := rootOf(r)
	if err != nil {
		return err
	}
	var p [][]byte
	if cp.Size > 0 && cp.Size < n {
		ns, err := proof.Consistency(cp.Size, n)
		if err != nil {
			return fmt.Errorf("ctlog: %w", err)
		}
		h, err := nodeHashes(ctx, q, ns.IDs)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBehind, err)
		}
		if p, err = ns.Rehash(h, hasher.HashChildren); err != nil {
			return fmt.Errorf("ctlog: %w", err)
		}
	}
	if err := proof.VerifyConsistency(hasher, cp.Size, n, p, cp.Root[:], root[:]); err != nil {
		return fmt.Errorf("%w: the %d entries in %s (root %x…) do not extend the tree of %d the log last signed (root %x…, %s, %s): %w. "+
			"Restore the database (docs/operations/proofs.md)", ErrBehind, n, DBFile, root[:8], cp.Size, cp.Root[:8], when, StateFile, err)
	}
	return nil
}

// recordPending writes the state before a commit: the last committed
// checkpoint (in the database, read inside the write transaction, so no
// other writer can move it) and the one about to be committed.
func (a *appender) recordPending(msg []byte) error {
	prev, err := latestLogCheckpoint(a.ctx, a.tx)
	if err != nil {
		return err
	}
	st := &ttpstate.State{Checkpoint: string(prev), Pending: string(msg)}
	if prev == nil {
		st = &ttpstate.State{Checkpoint: string(msg)} // the first checkpoint (Init)
	}
	return ttpstate.Write(a.l.statePath(), st)
}

// recordCommitted turns a pending checkpoint the database holds into the
// committed one. Each commit's own write already records the previous
// commit as committed, so this only matters for the last one: it runs at
// Close, and a log killed before it leaves that last checkpoint pending
// (Open then accepts a database without it; docs/operations/proofs.md).
func (l *Log) recordCommitted(ctx context.Context) {
	st, err := ttpstate.Read(l.statePath())
	if err != nil || st.Pending == "" {
		return
	}
	latest, err := latestLogCheckpoint(ctx, l.db)
	if err != nil || string(latest) != st.Pending {
		return
	}
	ttpstate.Write(l.statePath(), &ttpstate.State{Checkpoint: st.Pending})
}
