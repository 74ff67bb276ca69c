package ctfollow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/transparency-dev/formats/log"
)

// stateJSON is the state file's encoding.
type stateJSON struct {
	Version    int       `json:"version"`
	Kind       string    `json:"kind"`
	Origin     string    `json:"origin"`
	Checkpoint string    `json:"checkpoint"`
	Size       uint64    `json:"size"`
	Root       []byte    `json:"root"`
	Range      [][]byte  `json:"range"`
	KeyCount   uint64    `json:"key_count"`
	Verified   time.Time `json:"verified"`
}

const stateVersion = 1

// load reads or creates the state in c.Dir.
func (f *Follower) load() error {
	dir := f.c.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("ctfollow: %w", err)
	}
	_, kerr := os.Stat(f.keysPath)
	keysExisted := kerr == nil
	kf, err := os.OpenFile(f.keysPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("ctfollow: %w", err)
	}
	if err := lockKeys(kf); err != nil {
		kf.Close()
		return err
	}
	if err := f.loadState(keysExisted); err != nil {
		kf.Close()
		return err
	}
	fi, err := kf.Stat()
	if err != nil {
		kf.Close()
		return fmt.Errorf("ctfollow: %w", err)
	}
	want := int64(f.st.KeyCount) * KeySize
	if fi.Size() < want {
		kf.Close()
		return &StateError{Dir: dir, Err: fmt.Errorf("%s holds %d bytes, the state needs %d keys (%d bytes): the keys file was lost or truncated", KeysFile, fi.Size(), f.st.KeyCount, want)}
	}
	if fi.Size() > want {
		f.log.Info("ctfollow: truncating keys an unfinished sync left", "keys", (fi.Size()-want)/KeySize)
		if err := kf.Truncate(want); err != nil {
			kf.Close()
			return fmt.Errorf("ctfollow: %w", err)
		}
	}
	if _, err := kf.Seek(want, io.SeekStart); err != nil {
		kf.Close()
		return fmt.Errorf("ctfollow: %w", err)
	}
	f.keys = kf
	return nil
}

// loadState reads the state file, or writes an empty one if there is
// none and there was no keys file either.
func (f *Follower) loadState(keysExisted bool) error {
	dir := f.c.Dir
	raw, err := os.ReadFile(filepath.Join(dir, StateFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if keysExisted {
			return &StateError{Dir: dir, Err: fmt.Errorf("%s exists but %s is missing: the state was lost; move the directory away to start over", KeysFile, StateFile)}
		}
		f.st = &State{Origin: f.origin}
		return f.writeState(f.st)
	case err != nil:
		return fmt.Errorf("ctfollow: %w", err)
	}
	st, err := f.parseState(raw)
	if err != nil {
		return &StateError{Dir: dir, Err: err}
	}
	f.st = st
	return nil
}

func (f *Follower) parseState(raw []byte) (*State, error) {
	var j stateJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("%s: %w", StateFile, err)
	}
	if j.Version != stateVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", StateFile, j.Version, stateVersion)
	}
	if j.Kind != f.c.Kind || j.Origin != f.origin {
		return nil, fmt.Errorf("%s is for the %s log %q, not the %s log %q", StateFile, j.Kind, j.Origin, f.c.Kind, f.origin)
	}
	st := &State{Origin: j.Origin, Size: j.Size, Root: j.Root, KeyCount: j.KeyCount, Range: j.Range, Verified: j.Verified, Checkpoint: []byte(j.Checkpoint)}
	r, err := f.rf.NewRange(0, st.Size, st.Range)
	if err != nil {
		return nil, fmt.Errorf("%s: compact range: %w", StateFile, err)
	}
	if st.Size == 0 {
		if st.KeyCount != 0 {
			return nil, fmt.Errorf("%s: keys for an empty tree", StateFile)
		}
		if len(st.Checkpoint) == 0 {
			return st, nil
		}
	} else if root, err := r.GetRootHash(nil); err != nil || !bytes.Equal(root, st.Root) {
		return nil, fmt.Errorf("%s: the compact range does not hash to the root", StateFile)
	}
	cp, _, _, err := log.ParseCheckpoint(st.Checkpoint, f.origin, f.v)
	if err != nil {
		return nil, fmt.Errorf("%s: the checkpoint does not verify with the configured key: %w", StateFile, err)
	}
	if cp.Size != st.Size || (st.Size > 0 && !bytes.Equal(cp.Hash, st.Root)) {
		return nil, fmt.Errorf("%s: the checkpoint is for size %d, the state for %d", StateFile, cp.Size, st.Size)
	}
	if st.KeyCount < st.Size {
		return nil, fmt.Errorf("%s: %d keys for %d entries", StateFile, st.KeyCount, st.Size)
	}
	return st, nil
}

// writeState persists st atomically.
func (f *Follower) writeState(st *State) error {
	j := stateJSON{
		Version: stateVersion, Kind: f.c.Kind, Origin: f.origin, Checkpoint: string(st.Checkpoint),
		Size: st.Size, Root: st.Root, Range: st.Range, KeyCount: st.KeyCount, Verified: st.Verified.UTC(),
	}
	if j.Range == nil {
		j.Range = [][]byte{}
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("ctfollow: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(f.c.Dir, StateFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("ctfollow: writing state: %w", err)
	}
	return nil
}
