// Package ctsynth makes and serves a synthetic static-ct-api log of any size,
// for measuring CT mirrors at the scale of the Web's logs (hundreds of
// millions of entries) on one machine's disk.
//
// How it is made: entry i is a deterministic function of i (see
// AppendTileLeaf): a real DER certificate template with its serial and 32
// bytes of its RSA key varied, logged as a precert_entry, as the final
// certificate of the previous precertificate with an embedded SCT list, or as
// a plain x509_entry; no entry is signed. Generate hashes every entry once
// and stores the hash tiles (level 0 is 32 bytes per entry, 3.2 GB at 100
// million) and a checkpoint signed the way static-ct-api says (an
// RFC6962NoteSignature by an ECDSA P-256 key). Data tiles are not stored:
// the server regenerates them from the index on each request, byte for byte
// what Generate hashed, so a follower that checks every entry against the
// hash tiles and the signed root finds a consistent log.
package ctsynth

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/transparency-dev/formats/log"
	tnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// TileWidth is the number of entries (or hashes) in a full tile.
const TileWidth = 256

// Options say what log Generate makes.
type Options struct {
	Entries  uint64    // size of the log, at least 1
	Origin   string    // checkpoint origin, e.g. "synthetic.pkie.example/2026"
	Progress io.Writer // a line every few seconds; nil for none
	Now      func() time.Time
}

// meta is the generated log's description, written last: a directory
// without it is an unfinished generation.
type meta struct {
	Entries   uint64  `json:"entries"`
	Origin    string  `json:"origin"`
	Root      string  `json:"root"`
	Generated string  `json:"generated"`
	Seconds   float64 `json:"seconds"`
}

const (
	metaFile       = "meta.json"
	checkpointFile = "checkpoint"
	keyFile        = "log.key"
	pubFile        = "log.pub"
)

func levelFile(dir string, level int) string {
	return filepath.Join(dir, "level-"+strconv.Itoa(level)+".hashes")
}

// Generate writes a log of o.Entries entries into dir (created if needed;
// an unfinished generation there is replaced, a finished one refused).
// It uses every core and reports progress on o.Progress.
func Generate(ctx context.Context, dir string, o Options) (err error) {
	if o.Entries == 0 || o.Entries >= 1<<40 {
		return fmt.Errorf("ctsynth: %d entries: want 1 to 2^40-1", o.Entries)
	}
	if o.Origin == "" {
		return errors.New("ctsynth: empty origin")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if _, err := os.Stat(filepath.Join(dir, metaFile)); err == nil {
		return fmt.Errorf("ctsynth: %s already holds a generated log", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	start := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	vkey, err := tnote.RFC6962VerifierString(o.Origin, key.Public())
	if err != nil {
		return fmt.Errorf("ctsynth: origin %q: %w", o.Origin, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, pubFile), []byte(vkey+"\n"), 0o644); err != nil {
		return err
	}
	root, err := hashAll(ctx, dir, o)
	if err != nil {
		return err
	}
	cp, err := signCheckpoint(key, o.Origin, o.Entries, root, uint64(o.Now().UnixMilli()))
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, checkpointFile), cp, 0o644); err != nil {
		return err
	}
	m, _ := json.MarshalIndent(meta{Entries: o.Entries, Origin: o.Origin, Root: base64.StdEncoding.EncodeToString(root[:]),
		Generated: o.Now().UTC().Format(time.RFC3339), Seconds: time.Since(start).Seconds()}, "", "  ")
	return atomicfile.WriteFile(filepath.Join(dir, metaFile), append(m, '\n'), 0o644)
}

// hashAll computes every entry's leaf hash on all cores, folds them in
// order into a compact range, and writes the nodes the hash tiles hold (tree
// levels 0, 8, 16, ...) to one file per tile level.
func hashAll(ctx context.Context, dir string, o Options) ([32]byte, error) {
	n := o.Entries
	levels := 1
	for c := n / TileWidth; c > 0; c /= TileWidth {
		levels++
	}
	files := make([]*os.File, levels)
	writers := make([]*bufio.Writer, levels)
	for l := range levels {
		f, err := os.Create(levelFile(dir, l))
		if err != nil {
			return [32]byte{}, err
		}
		defer f.Close()
		files[l], writers[l] = f, bufio.NewWriterSize(f, 1<<20)
	}
	var werr error
	visit := func(id compact.NodeID, h []byte) {
		if id.Level%8 == 0 && werr == nil {
			_, werr = writers[id.Level/8].Write(h)
		}
	}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)

	// Batches of entries are hashed by the workers and folded in order.
	const batch = 16 * TileWidth
	workers := runtime.GOMAXPROCS(0)
	type job struct {
		first  uint64
		hashes [][32]byte
		done   chan struct{}
	}
	queue := make(chan *job, 2*workers)
	todo := make(chan *job, 2*workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var buf []byte
			for j := range todo {
				for k := range j.hashes {
					var ts int
					buf, ts = AppendTileLeaf(buf[:0], j.first+uint64(k))
					j.hashes[k] = LeafHash(buf[:ts])
				}
				close(j.done)
			}
		})
	}
	go func() {
		defer close(queue)
		defer close(todo)
		for first := uint64(0); first < n; first += batch {
			j := &job{first: first, hashes: make([][32]byte, min(batch, n-first)), done: make(chan struct{})}
			select {
			case queue <- j:
			case <-ctx.Done():
				return
			}
			todo <- j
		}
	}()
	last := time.Now()
	start := last
	var folded uint64
	for j := range queue {
		<-j.done
		for k := range j.hashes {
			if err := cr.Append(j.hashes[k][:], visit); err != nil {
				return [32]byte{}, err
			}
		}
		folded += uint64(len(j.hashes))
		if err := ctx.Err(); err != nil {
			return [32]byte{}, err
		}
		if o.Progress != nil && time.Since(last) > 5*time.Second {
			last = time.Now()
			el := time.Since(start).Seconds()
			fmt.Fprintf(o.Progress, "generated %d of %d entries (%.1f%%), %.0f entries/s, %.0f s left\n",
				folded, n, 100*float64(folded)/float64(n), float64(folded)/el, el/float64(folded)*float64(n-folded))
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return [32]byte{}, err
	}
	if werr != nil {
		return [32]byte{}, werr
	}
	root, err := cr.GetRootHash(nil)
	if err != nil {
		return [32]byte{}, err
	}
	for l, w := range writers {
		if err := w.Flush(); err != nil {
			return [32]byte{}, err
		}
		if err := files[l].Sync(); err != nil {
			return [32]byte{}, err
		}
	}
	return [32]byte(root), nil
}

// rfc6962Signer signs checkpoints as static-ct-api says: the note
// signature is a timestamp and an RFC 6962 digitally-signed TreeHeadSignature
// (ECDSA P-256 over SHA-256) of the checkpoint's size and root.
type rfc6962Signer struct {
	name    string
	keyHash uint32
	key     *ecdsa.PrivateKey
	time    uint64
}

func (s *rfc6962Signer) Name() string    { return s.name }
func (s *rfc6962Signer) KeyHash() uint32 { return s.keyHash }

func (s *rfc6962Signer) Sign(msg []byte) ([]byte, error) {
	c := new(log.Checkpoint)
	rest, err := c.Unmarshal(msg)
	if err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("ctsynth: signing a checkpoint with extension lines or a bad body: %v", err)
	}
	// TreeHeadSignature: version v1, signature_type tree_hash, timestamp,
	// tree_size, sha256_root_hash.
	th := []byte{0, 1}
	th = binary.BigEndian.AppendUint64(th, s.time)
	th = binary.BigEndian.AppendUint64(th, c.Size)
	th = append(th, c.Hash...)
	d := sha256.Sum256(th)
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, d[:])
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint64(nil, s.time)
	out = append(out, 4 /* sha256 */, 3 /* ecdsa */)
	out = binary.BigEndian.AppendUint16(out, uint16(len(sig)))
	return append(out, sig...), nil
}

func signCheckpoint(key *ecdsa.PrivateKey, origin string, size uint64, root [32]byte, ms uint64) ([]byte, error) {
	spki, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	logID := sha256.Sum256(spki)
	h := sha256.New()
	h.Write([]byte(origin))
	h.Write([]byte{0x0a, 0x05})
	h.Write(logID[:])
	s := &rfc6962Signer{name: origin, keyHash: binary.BigEndian.Uint32(h.Sum(nil)), key: key, time: ms}
	body := log.Checkpoint{Origin: origin, Size: size, Hash: root[:]}.Marshal()
	return note.Sign(&note.Note{Text: string(body)}, s)
}

// Log is a generated log, opened for serving.
type Log struct {
	dir        string
	meta       meta
	checkpoint []byte
	vkey       string
	levels     []*os.File
	counts     []uint64 // hashes stored per tile level
}

// Open opens the log Generate wrote in dir, checking that every file is
// there with the size the log's entry count implies.
func Open(dir string) (*Log, error) {
	mb, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, fmt.Errorf("ctsynth: %s holds no finished log: %w", dir, err)
	}
	l := &Log{dir: dir}
	if err := json.Unmarshal(mb, &l.meta); err != nil {
		return nil, fmt.Errorf("ctsynth: %s: %w", metaFile, err)
	}
	if l.checkpoint, err = os.ReadFile(filepath.Join(dir, checkpointFile)); err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(filepath.Join(dir, pubFile))
	if err != nil {
		return nil, err
	}
	l.vkey = string(bytesTrimNL(pub))
	v, err := tnote.NewRFC6962Verifier(l.vkey)
	if err != nil {
		return nil, fmt.Errorf("ctsynth: %s: %w", pubFile, err)
	}
	if _, err := note.Open(l.checkpoint, note.VerifierList(v)); err != nil {
		return nil, fmt.Errorf("ctsynth: checkpoint does not verify with %s: %w", pubFile, err)
	}
	for lvl, c := 0, l.meta.Entries; c > 0 || lvl == 0; lvl, c = lvl+1, c/TileWidth {
		f, err := os.Open(levelFile(dir, lvl))
		if err != nil {
			l.Close()
			return nil, err
		}
		l.levels = append(l.levels, f)
		l.counts = append(l.counts, c)
		if fi, err := f.Stat(); err != nil || fi.Size() != int64(c)*32 {
			l.Close()
			return nil, fmt.Errorf("ctsynth: %s: want %d bytes", f.Name(), c*32)
		}
	}
	return l, nil
}

func bytesTrimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// Entries is the log's size.
func (l *Log) Entries() uint64 { return l.meta.Entries }

// Origin is the checkpoint origin.
func (l *Log) Origin() string { return l.meta.Origin }

// Checkpoint is the signed checkpoint note.
func (l *Log) Checkpoint() []byte { return l.checkpoint }

// VerifierKey is the log's key as a signed-note verifier key in the form
// transparency-dev/formats/note's NewRFC6962Verifier parses.
func (l *Log) VerifierKey() string { return l.vkey }

// GenerateSeconds is how long Generate took.
func (l *Log) GenerateSeconds() float64 { return l.meta.Seconds }

// HashBytes is the size of the stored hash tiles.
func (l *Log) HashBytes() int64 {
	var n int64
	for _, c := range l.counts {
		n += int64(c) * 32
	}
	return n
}

// Close closes the hash files.
func (l *Log) Close() error {
	var errs []error
	for _, f := range l.levels {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
