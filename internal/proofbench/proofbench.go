// Package proofbench measures sorted-tree proofs the way the PEC paper's
// Tables 1 and 2 do (§6.1): build a tree over n random 32-byte keys, then
// time proof generation and verification and measure proof sizes over random
// present and absent keys, together with the process's peak memory and the
// tree file's size. Each run also measures its own ceilings on the same
// machine: a bare SHA-256 recomputation of an audit path (the least any
// verifier must do) and one Ed25519 signature verification.
package proofbench

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/sortedtree"
)

// Config says what to measure.
type Config struct {
	Leaves  uint64    // keys in the tree
	Samples int       // random present keys, and as many absent keys (>= 1000)
	Dir     string    // where to write the tree file; os.TempDir() if empty
	Seed    uint64    // for the random keys
	Level   int       // the file's stored level; sortedtree.DefaultFileLevel if 0
	Origin  string    // checkpoint origin; "pkie.example/bench" if empty
	Log     io.Writer // progress lines; nil for none
	// TreeFile, if set, is a sorted-tree file to measure (a mirror's, say)
	// instead of a tree over Leaves random keys: Run opens it as a prover
	// does and proves keys it holds and random keys it lacks.
	TreeFile string
	// Paper, if set, is the paper's figures for the tree this run
	// stands in for; Run returns it in the Result, beside the measured.
	Paper *Paper
}

// Result is one tree's measurements. Times are microseconds; "sig" times
// include opening the signed checkpoint (Ed25519 verification, parsing,
// freshness) as a client that has not cached the root does, the others only
// decode and verify the proof against an already trusted root.
type Result struct {
	Leaves       uint64  `json:"leaves"`
	Samples      int     `json:"samples"`
	Depth        int     `json:"depth"`
	BuildSeconds float64 `json:"build_seconds"`
	WriteSeconds float64 `json:"write_seconds"`
	OpenSeconds  float64 `json:"open_seconds"`
	// WarmSeconds is how long after Open the tree's background fill of the
	// levels the file leaves out took (proofs work meanwhile, slower).
	WarmSeconds float64 `json:"warm_seconds"`
	// PeakRSSBytes is the process's peak resident memory (VmHWM) while it
	// generated the keys, built the tree, wrote it, and opened and used the
	// file; TreeBytes is what the opened tree itself holds (keys and
	// interior levels, mapped or in the heap).
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
	TreeBytes    uint64 `json:"tree_bytes"`
	FileBytes    int64  `json:"file_bytes"`

	GenPresenceUsP50 float64 `json:"gen_presence_us_p50"`
	GenPresenceUsAvg float64 `json:"gen_presence_us_avg"`
	GenPresenceUsMax float64 `json:"gen_presence_us_max"`
	GenAbsenceUsP50  float64 `json:"gen_absence_us_p50"`
	GenAbsenceUsAvg  float64 `json:"gen_absence_us_avg"`
	GenAbsenceUsMax  float64 `json:"gen_absence_us_max"`

	VerifyPresenceUsP50 float64 `json:"verify_presence_us_p50"`
	VerifyPresenceUsAvg float64 `json:"verify_presence_us_avg"`
	VerifyPresenceUsMax float64 `json:"verify_presence_us_max"`
	VerifyAbsenceUsP50  float64 `json:"verify_absence_us_p50"`
	VerifyAbsenceUsAvg  float64 `json:"verify_absence_us_avg"`
	VerifyAbsenceUsMax  float64 `json:"verify_absence_us_max"`

	VerifyPresenceSigUsP50 float64 `json:"verify_presence_sig_us_p50"`
	VerifyPresenceSigUsAvg float64 `json:"verify_presence_sig_us_avg"`
	VerifyPresenceSigUsMax float64 `json:"verify_presence_sig_us_max"`
	VerifyAbsenceSigUsP50  float64 `json:"verify_absence_sig_us_p50"`
	VerifyAbsenceSigUsAvg  float64 `json:"verify_absence_sig_us_avg"`
	VerifyAbsenceSigUsMax  float64 `json:"verify_absence_sig_us_max"`

	// Proof sizes in their binary encoding, without the checkpoint (which a
	// client fetches once per root, not once per connection).
	PresenceBytesAvg float64 `json:"presence_bytes_avg"`
	PresenceBytesMin int     `json:"presence_bytes_min"`
	PresenceBytesMax int     `json:"presence_bytes_max"`
	AbsenceBytesAvg  float64 `json:"absence_bytes_avg"`
	AbsenceBytesMin  int     `json:"absence_bytes_min"`
	AbsenceBytesMax  int     `json:"absence_bytes_max"`
	// CheckpointBytes is the signed note (text and one Ed25519 signature).
	CheckpointBytes int `json:"checkpoint_bytes"`

	// What provers serve: the proof checked against a signed sorted-tree
	// head (checkpoint.OpenHead: the head's signature and the signature of
	// the log checkpoint it is bound to), for a client that has cached
	// nothing. The Sig rows above, one checkpoint signature, are the lower
	// bound a head could have if it carried no binding.
	HeadBytes               int     `json:"head_bytes"`
	VerifyPresenceHeadUsP50 float64 `json:"verify_presence_head_us_p50"`
	VerifyPresenceHeadUsAvg float64 `json:"verify_presence_head_us_avg"`
	VerifyPresenceHeadUsMax float64 `json:"verify_presence_head_us_max"`
	VerifyAbsenceHeadUsP50  float64 `json:"verify_absence_head_us_p50"`
	VerifyAbsenceHeadUsAvg  float64 `json:"verify_absence_head_us_avg"`
	VerifyAbsenceHeadUsMax  float64 `json:"verify_absence_head_us_max"`

	// Signed proofs in the compact form: the proof plus a detached
	// checkpoint signature (timestamp, key hash, Ed25519 signature; see
	// checkpoint.Detach), which the client checks on the root the proof
	// recomputes. Bytes and verification time are per connection, for a
	// client that has cached nothing.
	PresenceSignedBytesAvg      float64 `json:"presence_signed_bytes_avg"`
	PresenceSignedBytesMax      int     `json:"presence_signed_bytes_max"`
	AbsenceSignedBytesAvg       float64 `json:"absence_signed_bytes_avg"`
	AbsenceSignedBytesMax       int     `json:"absence_signed_bytes_max"`
	VerifyPresenceDetachedUsP50 float64 `json:"verify_presence_detached_us_p50"`
	VerifyPresenceDetachedUsAvg float64 `json:"verify_presence_detached_us_avg"`
	VerifyPresenceDetachedUsMax float64 `json:"verify_presence_detached_us_max"`
	VerifyAbsenceDetachedUsP50  float64 `json:"verify_absence_detached_us_p50"`
	VerifyAbsenceDetachedUsAvg  float64 `json:"verify_absence_detached_us_avg"`
	VerifyAbsenceDetachedUsMax  float64 `json:"verify_absence_detached_us_max"`

	// Ceilings measured in the same run.
	CeilingPathUsP50    float64 `json:"ceiling_sha256_path_us_p50"`
	CeilingEd25519UsP50 float64 `json:"ceiling_ed25519_verify_us_p50"`

	// Paper is the paper's figures for the same kind of tree (Config.Paper).
	Paper *Paper `json:"paper,omitempty"`
}

func (c *Config) logf(format string, a ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", a...)
	}
}

// Run measures one tree.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Samples < 1000 {
		return nil, fmt.Errorf("proofbench: %d samples; at least 1000 are needed for p50 and max", cfg.Samples)
	}
	if cfg.Leaves == 0 && cfg.TreeFile == "" {
		return nil, fmt.Errorf("proofbench: the tree needs at least one key")
	}
	if cfg.Dir == "" {
		cfg.Dir = os.TempDir()
	}
	if cfg.Level == 0 {
		cfg.Level = sortedtree.DefaultFileLevel
	}
	if cfg.Origin == "" {
		cfg.Origin = "pkie.example/bench"
	}
	res := &Result{Leaves: cfg.Leaves, Samples: cfg.Samples, Paper: cfg.Paper}
	rng := rand.New(rand.NewChaCha8(seedBytes(cfg.Seed)))

	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()

	path := cfg.TreeFile
	if path == "" {
		var err error
		if path, err = buildTree(ctx, &cfg, rng, res); err != nil {
			return nil, err
		}
		defer os.Remove(path)
	} else {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("proofbench: %w", err)
		}
		res.FileBytes = fi.Size()
	}
	// Serve proofs from the memory-mapped file, as a prover does, after
	// letting the built tree go.
	runtime.GC()
	debug.FreeOSMemory()
	cfg.logf("opening the file (%.1f MB)", float64(res.FileBytes)/1e6)
	start := time.Now()
	tr, err := sortedtree.Open(path)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	res.OpenSeconds = time.Since(start).Seconds()
	select {
	case <-tr.Ready():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res.WarmSeconds = time.Since(start).Seconds() - res.OpenSeconds
	res.TreeBytes = tr.MemoryBytes()
	n := tr.Size()
	res.Leaves = n
	res.Depth = depth(n)

	skey, vkey, err := checkpoint.GenerateKey(cfg.Origin)
	if err != nil {
		return nil, err
	}
	signer, err := checkpoint.NewSigner(skey)
	if err != nil {
		return nil, err
	}
	verifier, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: cfg.Origin, Size: n, Root: tr.Root(), Time: now}, signer)
	if err != nil {
		return nil, err
	}
	res.CheckpointBytes = len(msg)
	det, err := checkpoint.Detach(msg, verifier)
	if err != nil {
		return nil, err
	}
	// The head a prover serves, bound to msg as the log checkpoint it was
	// built from, signed by the same key under the head's name.
	head := checkpoint.Head{Origin: checkpoint.HeadOrigin(cfg.Origin), Size: n, Root: tr.Root(), Time: now}
	if err := head.BindLog(msg, verifier); err != nil {
		return nil, err
	}
	headSigner, err := checkpoint.HeadSigner(signer, verifier)
	if err != nil {
		return nil, err
	}
	hmsg, err := checkpoint.SignHead(head, headSigner)
	if err != nil {
		return nil, err
	}
	res.HeadBytes = len(hmsg)

	present := make([][32]byte, cfg.Samples)
	absent := make([][32]byte, cfg.Samples)
	for i := range present {
		present[i] = tr.Key(rng.Uint64N(n))
		for {
			fill(rng, &absent[i])
			if !tr.Contains(absent[i]) {
				break
			}
		}
	}
	cfg.logf("proving and verifying %d present and %d absent keys", cfg.Samples, cfg.Samples)
	for _, set := range []struct {
		keys    [][32]byte
		present bool
	}{{present, true}, {absent, false}} {
		gen := make([]time.Duration, 0, cfg.Samples)
		ver := make([]time.Duration, 0, cfg.Samples)
		sig := make([]time.Duration, 0, cfg.Samples)
		dsig := make([]time.Duration, 0, cfg.Samples)
		hsig := make([]time.Duration, 0, cfg.Samples)
		sizes := make([]int, 0, cfg.Samples)
		for i, k := range set.keys {
			if i%256 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				// Collect the proofs' garbage outside the timed sections,
				// so that neither the times nor the peak RSS measure the
				// garbage collector's slack.
				runtime.GC()
			}
			t0 := time.Now()
			p, err := tr.Prove(k)
			gen = append(gen, time.Since(t0))
			if err != nil {
				return nil, err
			}
			enc, err := p.MarshalBinary()
			if err != nil {
				return nil, err
			}
			sizes = append(sizes, len(enc))

			// Without the signature: decode and verify against a root the
			// client already trusts.
			root := tr.Root()
			t0 = time.Now()
			var q sortedtree.Proof
			err = q.UnmarshalBinary(enc)
			var got bool
			if err == nil {
				got, err = q.Verify(k, n, root)
			}
			ver = append(ver, time.Since(t0))
			if err != nil || got != set.present {
				return nil, fmt.Errorf("proofbench: proof for %x failed to verify (present=%v): %v", k[:], got, err)
			}

			// With it: open the signed checkpoint first.
			t0 = time.Now()
			cp, err := checkpoint.Open(msg, verifier, cfg.Origin, time.Hour, time.Minute, now)
			if err == nil {
				var q sortedtree.Proof
				if err = q.UnmarshalBinary(enc); err == nil {
					got, err = q.Verify(k, cp.Size, cp.Root)
				}
			}
			sig = append(sig, time.Since(t0))
			if err != nil || got != set.present {
				return nil, fmt.Errorf("proofbench: signed proof for %x failed to verify: %v", k[:], err)
			}

			// As provers serve it: open the signed head, then the proof.
			t0 = time.Now()
			h, err := checkpoint.OpenHead(hmsg, verifier, time.Hour, time.Minute, now)
			if err == nil {
				var q sortedtree.Proof
				if err = q.UnmarshalBinary(enc); err == nil {
					got, err = q.Verify(k, h.Size, h.Root)
				}
			}
			hsig = append(hsig, time.Since(t0))
			if err != nil || got != set.present {
				return nil, fmt.Errorf("proofbench: proof under a signed head for %x failed to verify: %v", k[:], err)
			}

			// Compact: proof plus detached signature, checked on the
			// recomputed root.
			t0 = time.Now()
			var r sortedtree.Proof
			if err = r.UnmarshalBinary(enc); err == nil {
				var root [32]byte
				if root, err = r.RootFor(k); err == nil {
					_, err = checkpoint.OpenDetached(det, cfg.Origin, r.TreeSize, root, verifier, time.Hour, time.Minute, now)
				}
			}
			dsig = append(dsig, time.Since(t0))
			if err != nil || r.Present() != set.present {
				return nil, fmt.Errorf("proofbench: detached-signature proof for %x failed to verify: %v", k[:], err)
			}
		}
		g, v, s, ds, hs := summarize(gen), summarize(ver), summarize(sig), summarize(dsig), summarize(hsig)
		avg, lo, hi := sizeStats(sizes)
		if set.present {
			res.GenPresenceUsP50, res.GenPresenceUsAvg, res.GenPresenceUsMax = g.p50, g.avg, g.max
			res.VerifyPresenceUsP50, res.VerifyPresenceUsAvg, res.VerifyPresenceUsMax = v.p50, v.avg, v.max
			res.VerifyPresenceSigUsP50, res.VerifyPresenceSigUsAvg, res.VerifyPresenceSigUsMax = s.p50, s.avg, s.max
			res.VerifyPresenceHeadUsP50, res.VerifyPresenceHeadUsAvg, res.VerifyPresenceHeadUsMax = hs.p50, hs.avg, hs.max
			res.PresenceBytesAvg, res.PresenceBytesMin, res.PresenceBytesMax = avg, lo, hi
			res.VerifyPresenceDetachedUsP50, res.VerifyPresenceDetachedUsAvg, res.VerifyPresenceDetachedUsMax = ds.p50, ds.avg, ds.max
			res.PresenceSignedBytesAvg, res.PresenceSignedBytesMax = avg+checkpoint.DetachedSize, hi+checkpoint.DetachedSize
		} else {
			res.GenAbsenceUsP50, res.GenAbsenceUsAvg, res.GenAbsenceUsMax = g.p50, g.avg, g.max
			res.VerifyAbsenceUsP50, res.VerifyAbsenceUsAvg, res.VerifyAbsenceUsMax = v.p50, v.avg, v.max
			res.VerifyAbsenceSigUsP50, res.VerifyAbsenceSigUsAvg, res.VerifyAbsenceSigUsMax = s.p50, s.avg, s.max
			res.VerifyAbsenceHeadUsP50, res.VerifyAbsenceHeadUsAvg, res.VerifyAbsenceHeadUsMax = hs.p50, hs.avg, hs.max
			res.AbsenceBytesAvg, res.AbsenceBytesMin, res.AbsenceBytesMax = avg, lo, hi
			res.VerifyAbsenceDetachedUsP50, res.VerifyAbsenceDetachedUsAvg, res.VerifyAbsenceDetachedUsMax = ds.p50, ds.avg, ds.max
			res.AbsenceSignedBytesAvg, res.AbsenceSignedBytesMax = avg+checkpoint.DetachedSize, hi+checkpoint.DetachedSize
		}
	}

	cfg.logf("measuring ceilings")
	res.CeilingPathUsP50 = ceilingPath(res.Depth, cfg.Samples)
	res.CeilingEd25519UsP50 = ceilingEd25519(cfg.Samples)
	res.PeakRSSBytes = peakRSS()
	return res, nil
}

func seedBytes(s uint64) [32]byte {
	var b [32]byte
	binary.LittleEndian.PutUint64(b[:], s)
	copy(b[8:], "pkie proofbench")
	return b
}

func fill(r *rand.Rand, k *[32]byte) {
	for j := 0; j < 32; j += 8 {
		binary.LittleEndian.PutUint64(k[j:], r.Uint64())
	}
}

// depth is the length of the longest audit path in a tree of n leaves.
func depth(n uint64) int {
	d := 0
	for s := uint64(1); s < n; s <<= 1 {
		d++
	}
	return d
}

type stats struct{ p50, avg, max float64 }

func summarize(ds []time.Duration) stats {
	us := make([]float64, len(ds))
	sum := 0.0
	for i, d := range ds {
		us[i] = float64(d.Nanoseconds()) / 1e3
		sum += us[i]
	}
	slices.Sort(us)
	return stats{p50: us[len(us)/2], avg: sum / float64(len(us)), max: us[len(us)-1]}
}

func sizeStats(s []int) (avg float64, lo, hi int) {
	sum := 0
	for _, v := range s {
		sum += v
	}
	return float64(sum) / float64(len(s)), slices.Min(s), slices.Max(s)
}

// ceilingPath times depth chained SHA-256 compressions of 65-byte nodes: the
// bare work of recomputing one audit path, no decoding, no checks.
func ceilingPath(depth, samples int) float64 {
	var h [32]byte
	var buf [65]byte
	ds := make([]time.Duration, samples)
	for i := range ds {
		buf[1] = byte(i)
		t0 := time.Now()
		for j := 0; j < depth; j++ {
			copy(buf[1:], h[:])
			h = sha256.Sum256(buf[:])
		}
		ds[i] = time.Since(t0)
	}
	return summarize(ds).p50
}

// ceilingEd25519 times one Ed25519 verification of a checkpoint-sized message.
func ceilingEd25519(samples int) float64 {
	pub, priv, _ := ed25519.GenerateKey(nil)
	msg := make([]byte, 120)
	sig := ed25519.Sign(priv, msg)
	ds := make([]time.Duration, samples)
	for i := range ds {
		t0 := time.Now()
		if !ed25519.Verify(pub, msg, sig) {
			panic("ed25519 ceiling: own signature does not verify")
		}
		ds[i] = time.Since(t0)
	}
	return summarize(ds).p50
}

// resetPeakRSS resets the kernel's peak-RSS counter (VmHWM) for this
// process, so each tree's peak is its own (Linux: "5" to clear_refs).
func resetPeakRSS() {
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS returns VmHWM from /proc/self/status, or getrusage's maximum RSS
// where that is unavailable.
func peakRSS() uint64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				f := strings.Fields(v)
				if len(f) == 2 && f[1] == "kB" {
					if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
						return kb * 1024
					}
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		return uint64(ru.Maxrss) * 1024
	}
	return 0
}

// buildTree builds a tree over cfg.Leaves random keys and writes it to a
// temporary file, recording the times and size in res.
func buildTree(ctx context.Context, cfg *Config, rng *rand.Rand, res *Result) (string, error) {
	cfg.logf("generating %d random keys", cfg.Leaves)
	keys := make([][32]byte, cfg.Leaves)
	for i := range keys {
		fill(rng, &keys[i])
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	cfg.logf("building the tree")
	start := time.Now()
	tr := sortedtree.Build(keys)
	res.BuildSeconds = time.Since(start).Seconds()
	keys = nil
	cfg.logf("built %d leaves in %.2f s", tr.Size(), res.BuildSeconds)
	if err := ctx.Err(); err != nil {
		return "", err
	}

	f, err := os.CreateTemp(cfg.Dir, "pkie-bench-*.tree")
	if err != nil {
		return "", fmt.Errorf("proofbench: %w", err)
	}
	path := f.Name()
	f.Close()
	cfg.logf("writing %s", path)
	start = time.Now()
	if err := tr.WriteFileLevel(path, cfg.Level); err != nil {
		os.Remove(path)
		return "", err
	}
	res.WriteSeconds = time.Since(start).Seconds()
	fi, err := os.Stat(path)
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("proofbench: %w", err)
	}
	res.FileBytes = fi.Size()

	tr = nil
	return path, nil
}
