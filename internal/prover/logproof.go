package prover

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/pkie/pkie/checkpoint"
	ctlog "github.com/pkie/pkie/internal/oldctlog"
)

// ConsistencySource returns an RFC 6962 consistency proof between two sizes
// of a TTP's log (the hashes, first < second).
type ConsistencySource func(ctx context.Context, first, second uint64) ([][]byte, error)

// maxConsistencyBytes bounds a consistency proof answer: 64 base64 hashes
// of 32 bytes are under 3 KiB.
const maxConsistencyBytes = 16 << 10

// LogConsistency returns a ConsistencySource asking the CT log at base
// (GET /v1/log/proof/consistency, docs/formats/api-proofs.md).
func LogConsistency(base string, hc *http.Client) ConsistencySource {
	if hc == nil {
		hc = defaultHTTP
	}
	return func(ctx context.Context, first, second uint64) ([][]byte, error) {
		url := fmt.Sprintf("%s/v1/log/proof/consistency?first=%d&second=%d", strings.TrimSuffix(base, "/"), first, second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("log consistency proof %d→%d: %s", first, second, resp.Status)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxConsistencyBytes+1))
		if err != nil {
			return nil, fmt.Errorf("log consistency proof %d→%d: %w", first, second, err)
		}
		if len(body) > maxConsistencyBytes {
			return nil, fmt.Errorf("log consistency proof %d→%d: answer over %d bytes", first, second, maxConsistencyBytes)
		}
		return ctlog.ParseProofHashes(body)
	}
}

// checkLogConsistent checks with a proof from src that the log checkpoint
// h is bound to extends the one floor was bound to. A proof that cannot be
// fetched is an error, not a refusal: it says nothing about the log.
func checkLogConsistent(ctx context.Context, src ConsistencySource, floor, h *checkpoint.Head) (refused, err error) {
	a, b := floor.Log, h.Log
	if a.Origin == "" || a.Size == 0 || a.Size >= b.Size {
		return nil, nil // legacy floor, empty log, or sizes checkFloor compared
	}
	p, err := src(ctx, a.Size, b.Size)
	if err != nil {
		return nil, fmt.Errorf("fetching the log's consistency proof %d→%d: %w", a.Size, b.Size, err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, a.Size, b.Size, p, a.Root[:], b.Root[:]); err != nil {
		return fmt.Errorf("head bound to a log of %d entries (root %x…) that does not extend the one bound to the head accepted before (%d entries, root %x…): %w",
			b.Size, b.Root[:8], a.Size, a.Root[:8], err), nil
	}
	return nil, nil
}
