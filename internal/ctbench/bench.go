// Package ctbench measures pkie's CT pieces at the scale of the Web's logs,
// whose shards hold hundreds of millions of entries: a mirror
// following a synthetic static-ct-api log of N entries (internal/ctsynth)
// over loopback HTTP from empty, beside the ceiling of fetching and hashing
// the same tiles; proofs on the mirror's sorted tree beside a bare audit
// path and one signature verification; and add-chain throughput of pkie's
// log beside TesseraCT's on the same chains. Every ceiling is measured in
// the same run as the figure it bounds.
package ctbench

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/ctsynth"
	"github.com/pkie/pkie/internal/proofbench"
)

// Config says what to measure.
type Config struct {
	// Entries is the synthetic log's size.
	Entries uint64
	// DataDir holds the synthetic log; a log of Entries entries there is
	// reused, an unfinished one regenerated, one of another size refused.
	DataDir string
	// WorkDir holds the mirror's state and tree for the run (removed
	// after); default DataDir.
	WorkDir string
	// Parallel is the number of concurrent tile fetches, for the ceiling
	// and the mirror alike; default 4.
	Parallel int
	// MirrorArgv, if set, runs the mirror in a child process (a pkie
	// binary's "bench ct --mirror-child"), so that its peak RSS is its
	// own. Else the mirror runs in this process.
	MirrorArgv []string
	// CeilingEntries, if positive and below Entries, limits the ingest
	// ceiling to the log's first CeilingEntries entries (rounded down to
	// whole tiles): the ceiling is a rate, and a pass over all of a
	// 100M-entry log costs as long as the mirror's.
	CeilingEntries uint64
	// SkipMirror skips the mirror (ceilings and proofs only).
	SkipMirror bool
	// Samples is how many present and absent keys to prove (>= 1000).
	Samples int
	// Chains, if positive, measures add-chain with that many distinct
	// chains from Concurrency clients (default 64), against pkie's log and,
	// if TesseraCT names its POSIX binary, TesseraCT.
	Chains      int
	Concurrency int
	TesseraCT   string
	// Progress gets progress lines; nil for none.
	Progress io.Writer
}

// Result is one run's figures.
type Result struct {
	Entries uint64 `json:"entries"`
	// Log describes the synthetic log.
	Log struct {
		Reused          bool    `json:"reused"`
		GenerateSeconds float64 `json:"generate_seconds"`
		HashTileBytes   int64   `json:"hash_tile_bytes"`
		DataTileBytes   uint64  `json:"data_tile_bytes"`
	} `json:"log"`
	Parallel int `json:"parallel"`
	// Ceiling is a bare pass over the same tiles: GET, parse, leaf hash
	// and key hash of every entry, nothing checked or stored.
	Ceiling *ctsynth.IngestResult `json:"ingest_ceiling"`
	Mirror  *MirrorResult         `json:"mirror,omitempty"`
	// MirrorVsCeiling is the mirror's ingest rate over the ceiling's.
	MirrorVsCeiling float64 `json:"mirror_vs_ceiling,omitempty"`
	// ProofsOn says which tree the proofs were measured on.
	ProofsOn string             `json:"proofs_on"`
	Proofs   *proofbench.Result `json:"proofs"`
	// Signature ceilings, p50 of 1,000 each: one Ed25519 verification (a
	// sorted-tree head's signature) and one ECDSA P-256 verification (a
	// static-ct-api checkpoint's).
	Ed25519VerifyUsP50   float64 `json:"ed25519_verify_us_p50"`
	ECDSAP256VerifyUsP50 float64 `json:"ecdsa_p256_verify_us_p50"`
	// Ratios against the same-run ceilings (pkie's targets: generation ≤
	// 3× a bare audit path, verification ≤ 1.5× one signature check).
	GenVsPathP50      float64 `json:"gen_vs_path_p50"`
	VerifySigVsSigP50 float64 `json:"verify_sig_vs_sig_p50"`

	// Head is a CT client's verification against the mirror's own signed
	// head (when the mirror built one).
	Head *HeadVerify `json:"mirror_head,omitempty"`

	AddChain []*AddChainResult `json:"add_chain,omitempty"`
	// AddChainRatio is pkie's log's throughput over TesseraCT's.
	AddChainRatio float64  `json:"add_chain_pkie_vs_tesseract,omitempty"`
	Notes         []string `json:"notes,omitempty"`
}

func (c *Config) logf(format string, a ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", a...)
	}
}

const onMirrorTree = "the mirror's sorted-tree file"

// Run measures everything Config asks for.
func Run(ctx context.Context, c Config) (*Result, error) {
	if c.Entries == 0 {
		return nil, errors.New("ctbench: the log needs at least one entry")
	}
	if c.DataDir == "" {
		return nil, errors.New("ctbench: no data directory")
	}
	if c.Samples < 1000 {
		return nil, fmt.Errorf("ctbench: %d samples; at least 1000", c.Samples)
	}
	if c.Parallel <= 0 {
		c.Parallel = 4
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	if c.WorkDir == "" {
		c.WorkDir = c.DataDir
	}
	r := &Result{Entries: c.Entries, Parallel: c.Parallel}

	l, reused, err := OpenOrGenerate(ctx, c.DataDir, c.Entries, c.Progress)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	r.Log.Reused = reused
	r.Log.GenerateSeconds = l.GenerateSeconds()
	r.Log.HashTileBytes = l.HashBytes()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: l.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	c.logf("serving the synthetic log of %d entries at %s", c.Entries, url)

	fetch := &ctsynth.Fetcher{URL: url, Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.Parallel}}}
	ceil := c.Entries
	if c.CeilingEntries > 0 && c.CeilingEntries < c.Entries {
		ceil = max(ctsynth.TileWidth, c.CeilingEntries/ctsynth.TileWidth*ctsynth.TileWidth)
	}
	c.logf("ceiling: fetching and hashing the data tiles of %d entries (%d parallel)", ceil, c.Parallel)
	if r.Ceiling, err = fetch.Ingest(ctx, ceil, c.Parallel, c.Progress); err != nil {
		return nil, fmt.Errorf("ctbench: ceiling: %w", err)
	}
	r.Log.DataTileBytes = r.Ceiling.Bytes * c.Entries / ceil
	c.logf("ceiling: %.0f entries/s (%.1f MB/s)", r.Ceiling.EntriesPerSecond, float64(r.Ceiling.Bytes)/r.Ceiling.Seconds/1e6)

	var mirrorDir string
	if !c.SkipMirror {
		if mirrorDir, err = os.MkdirTemp(c.WorkDir, "mirror-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(mirrorDir)
		job := MirrorJob{URL: url, VerifierKey: l.VerifierKey(), Dir: mirrorDir, Parallel: c.Parallel}
		if len(c.MirrorArgv) > 0 {
			c.logf("mirror: following the log from empty in a child process")
			r.Mirror, err = runMirrorChild(ctx, c.MirrorArgv, job, c.Progress)
		} else {
			c.logf("mirror: following the log from empty in this process")
			r.Mirror, err = RunMirror(ctx, job, c.Progress)
		}
		if err != nil {
			return nil, fmt.Errorf("ctbench: mirror: %w", err)
		}
		if r.Mirror.Entries != c.Entries {
			return nil, fmt.Errorf("ctbench: the mirror verified %d entries of %d", r.Mirror.Entries, c.Entries)
		}
		r.MirrorVsCeiling = r.Mirror.EntriesPerSecond / r.Ceiling.EntriesPerSecond
		if r.Mirror.Missing != "" {
			r.Notes = append(r.Notes, "mirror: not measured: "+r.Mirror.Missing)
		}
		c.logf("mirror: %.0f entries/s (%.2f× the ceiling)", r.Mirror.EntriesPerSecond, r.MirrorVsCeiling)
	}
	// The ceiling's server and the log are no longer needed; proofs and
	// the logs' add-chain run alone.
	srv.Close()

	pc := proofbench.Config{Samples: c.Samples, Dir: c.WorkDir, Origin: "pkie.example/ct-mirror", Paper: proofbench.PaperCT(), Log: c.Progress}
	if r.Mirror != nil && r.Mirror.TreeFile != "" {
		pc.TreeFile = r.Mirror.TreeFile
		r.ProofsOn = onMirrorTree
	} else {
		pc.Leaves = c.Entries
		r.ProofsOn = "a sorted tree of as many random keys as the log has distinct keys (the mirror's tree was not built)"
	}
	c.logf("proofs: on %s", r.ProofsOn)
	if r.Proofs, err = proofbench.Run(ctx, pc); err != nil {
		return nil, fmt.Errorf("ctbench: proofs: %w", err)
	}
	r.Ed25519VerifyUsP50, r.ECDSAP256VerifyUsP50 = signatureCeilings()
	if r.Mirror != nil && r.Mirror.TreeFile != "" {
		c.logf("proofs: a CT client's verification against the mirror's signed head")
		if r.Head, err = measureHeadVerify(ctx, filepath.Dir(r.Mirror.TreeFile), r.Mirror.TreeFile, l.VerifierKey(), c.Samples, r.Ed25519VerifyUsP50, r.ECDSAP256VerifyUsP50); err != nil {
			return nil, err
		}
	}
	if r.Proofs.CeilingPathUsP50 > 0 {
		r.GenVsPathP50 = max(r.Proofs.GenPresenceUsP50, r.Proofs.GenAbsenceUsP50) / r.Proofs.CeilingPathUsP50
	}
	if r.Ed25519VerifyUsP50 > 0 {
		r.VerifySigVsSigP50 = max(r.Proofs.VerifyPresenceSigUsP50, r.Proofs.VerifyAbsenceSigUsP50) / r.Ed25519VerifyUsP50
	}

	if c.Chains > 0 {
		if err := addChain(ctx, &c, r); err != nil {
			return nil, fmt.Errorf("ctbench: add-chain: %w", err)
		}
	}
	return r, nil
}

// OpenOrGenerate opens the synthetic log of n entries in dir, generating it
// first if dir holds none (or an unfinished one). A finished log of
// another size is an error, not replaced.
func OpenOrGenerate(ctx context.Context, dir string, n uint64, progress io.Writer) (l *ctsynth.Log, reused bool, err error) {
	c := &Config{Progress: progress}
	l, err = ctsynth.Open(dir)
	if err == nil {
		if l.Entries() != n {
			l.Close()
			return nil, false, fmt.Errorf("ctbench: %s holds a log of %d entries, not %d: name another directory", dir, l.Entries(), n)
		}
		c.logf("reusing the synthetic log in %s (generated in %.0f s)", dir, l.GenerateSeconds())
		return l, true, nil
	}
	if _, serr := os.Stat(filepath.Join(dir, "meta.json")); !errors.Is(serr, fs.ErrNotExist) {
		return nil, false, err // a finished log that does not open
	}
	// Nothing, or an unfinished generation: start over in a clean
	// directory, but never remove what a generation did not write.
	if err := removeUnfinished(dir); err != nil {
		return nil, false, err
	}
	c.logf("generating a synthetic log of %d entries in %s", n, dir)
	if err := ctsynth.Generate(ctx, dir, ctsynth.Options{Entries: n, Origin: "synthetic.pkie.example/bench", Progress: progress}); err != nil {
		return nil, false, err
	}
	if l, err = ctsynth.Open(dir); err != nil {
		return nil, false, err
	}
	c.logf("generated in %.1f s", l.GenerateSeconds())
	return l, false, nil
}

// removeUnfinished removes dir if it holds only what an unfinished
// generation or an interrupted run leaves, and refuses otherwise.
func removeUnfinished(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		ok := n == "log.key" || n == "log.pub" || n == "checkpoint" || strings.HasPrefix(n, ".") && strings.Contains(n, ".tmp-") ||
			strings.HasPrefix(n, "level-") && strings.HasSuffix(n, ".hashes") ||
			e.IsDir() && (strings.HasPrefix(n, "mirror-") || strings.HasPrefix(n, "addchain-")) ||
			strings.HasPrefix(n, "pkie-bench-") && strings.HasSuffix(n, ".tree")
		if !ok {
			return fmt.Errorf("ctbench: %s holds %s, which is not part of a synthetic log: name an empty or new directory", dir, n)
		}
	}
	return os.RemoveAll(dir)
}

// signatureCeilings returns the p50 of 1,000 Ed25519 and 1,000 ECDSA P-256
// verifications of a 32-byte digest, in microseconds.
func signatureCeilings() (ed, ec float64) {
	msg := sha256.Sum256([]byte("pkie bench ct"))
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	edSig := ed25519.Sign(priv, msg[:])
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecSig, _ := ecdsa.SignASN1(rand.Reader, key, msg[:])
	const n = 1000
	t := make([]time.Duration, n)
	for i := range t {
		t0 := time.Now()
		if !ed25519.Verify(pub, msg[:], edSig) {
			panic("ctbench: Ed25519 signature does not verify")
		}
		t[i] = time.Since(t0)
	}
	ed = quantile(durationsUs(t), 0.5)
	for i := range t {
		t0 := time.Now()
		if !ecdsa.VerifyASN1(&key.PublicKey, msg[:], ecSig) {
			panic("ctbench: ECDSA signature does not verify")
		}
		t[i] = time.Since(t0)
	}
	ec = quantile(durationsUs(t), 0.5)
	return ed, ec
}

func addChain(ctx context.Context, c *Config, r *Result) error {
	c.logf("add-chain: issuing %d chains", c.Chains)
	cs, err := newChains(c.Chains)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(c.WorkDir, "addchain-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	url, stop, err := runPkieLog(ctx, filepath.Join(dir, "pkie"), cs.rootPEM, defaultTiming, c.Concurrency)
	if err != nil {
		return fmt.Errorf("pkie log: %w", err)
	}
	c.logf("add-chain: pkie log, %d clients", c.Concurrency)
	pk, err := cs.submit(ctx, "pkie log", url, c.Concurrency)
	stop()
	if err != nil {
		return err
	}
	r.AddChain = append(r.AddChain, pk)
	c.logf("add-chain: pkie log %.0f/s", pk.PerSecond)
	if c.TesseraCT == "" {
		r.Notes = append(r.Notes, "add-chain: TesseraCT not run (no binary)")
		return nil
	}
	url, stop, err = runTesseraCT(ctx, c.TesseraCT, filepath.Join(dir, "tesseract"), cs.rootPEM, defaultTiming)
	if err != nil {
		return err
	}
	c.logf("add-chain: TesseraCT, %d clients", c.Concurrency)
	tc, err := cs.submit(ctx, "TesseraCT "+"v0.1.1 POSIX", url, c.Concurrency)
	stop()
	if err != nil {
		return err
	}
	r.AddChain = append(r.AddChain, tc)
	r.AddChainRatio = pk.PerSecond / tc.PerSecond
	c.logf("add-chain: TesseraCT %.0f/s; pkie/TesseraCT %.2f", tc.PerSecond, r.AddChainRatio)
	return nil
}

func durationsUs(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v.Nanoseconds()) / 1e3
	}
	return out
}

func durationsMs(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v.Nanoseconds()) / 1e6
	}
	return out
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
