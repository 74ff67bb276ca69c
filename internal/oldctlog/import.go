package oldctlog

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ImportBatch is how many chains one import transaction (and checkpoint)
// covers.
const ImportBatch = 2000

// ImportStats counts an import.
type ImportStats struct {
	Chains     int `json:"chains"`
	Added      int `json:"added"`
	Duplicates int `json:"duplicates"`
}

type importer struct {
	l        *Log
	ctx      context.Context
	batch    [][][]byte
	stats    ImportStats
	progress func(ImportStats)
}

func (im *importer) add(chain [][]byte) error {
	im.batch = append(im.batch, chain)
	if len(im.batch) >= ImportBatch {
		return im.flush()
	}
	return nil
}

func (im *importer) flush() error {
	if len(im.batch) == 0 {
		return nil
	}
	rs, err := im.l.AddChains(im.ctx, im.batch)
	if err != nil {
		return err
	}
	for _, r := range rs {
		im.stats.Chains++
		if r.Duplicate {
			im.stats.Duplicates++
		} else {
			im.stats.Added++
		}
	}
	im.batch = im.batch[:0]
	if im.progress != nil {
		im.progress(im.stats)
	}
	return nil
}

// ImportDir logs every certificate file under dir (recursively): files
// ending .pem, .crt, .cer or .der, each one chain, leaf first, PEM or DER.
// Chains are committed in batches of ImportBatch; on error the batches
// before it stay committed and the error names the file.
func (l *Log) ImportDir(ctx context.Context, dir string, progress func(ImportStats)) (*ImportStats, error) {
	im := &importer{l: l, ctx: ctx, progress: progress}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return ctx.Err()
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".pem", ".crt", ".cer", ".der":
		default:
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Size() > MaxAddChainBytes {
			return fmt.Errorf("%s: %d bytes, more than a chain may have (%d)", path, fi.Size(), MaxAddChainBytes)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		chain, err := ParseChain(b)
		if err == nil {
			// A batch holds only what will be stored, not every certificate
			// a file carried.
			chain, err = l.checkChain(chain)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return im.add(chain)
	})
	if err == nil {
		err = im.flush()
	}
	return &im.stats, err
}

// ImportJSONLines logs chains from r, one JSON object per line in the
// add-chain form {"chain": [base64 DER, ...]}. Blank lines are skipped; an
// error names the line.
func (l *Log) ImportJSONLines(ctx context.Context, r io.Reader, progress func(ImportStats)) (*ImportStats, error) {
	im := &importer{l: l, ctx: ctx, progress: progress}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 2*MaxAddChainBytes)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		if !json.Valid(b) {
			return &im.stats, fmt.Errorf("line %d: not a JSON object", line)
		}
		chain, err := ParseAddChainRequest(b)
		if err == nil {
			chain, err = l.checkChain(chain) // see ImportDir
		}
		if err != nil {
			return &im.stats, fmt.Errorf("line %d: %w", line, err)
		}
		if err := im.add(chain); err != nil {
			return &im.stats, err
		}
		if err := ctx.Err(); err != nil {
			return &im.stats, err
		}
	}
	if err := sc.Err(); err != nil {
		return &im.stats, fmt.Errorf("line %d: %w", line+1, err)
	}
	return &im.stats, im.flush()
}
