package cloud

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/checkpoint"
)

// peerTimeout bounds one question to a peer replica: a peer that is down
// must not hold a sync up for the HTTP client's whole timeout.
const peerTimeout = 10 * time.Second

// CheckPeer checks a peer replica's address: the base URL of its HTTP
// listener (pkie cloud serve --http).
func CheckPeer(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q: want the base URL of a replica's HTTP listener, such as http://10.0.0.2:9433", raw)
	}
	return nil
}

// peerHeads returns a pkie.ProverEnv.Peers for enhancement name: it asks
// every peer at once for GET /v1/heads/{name} and returns the bodies of
// those that answer 200 within peerTimeout. The bodies are not trusted
// here: the prover verifies each with its TTP's pinned key, so a peer can
// withhold a head but never forge one.
func peerHeads(peers []string, name string, hc *http.Client, log *slog.Logger) func(context.Context) [][]byte {
	return func(ctx context.Context) [][]byte {
		ctx, cancel := context.WithTimeout(ctx, peerTimeout)
		defer cancel()
		var (
			mu    sync.Mutex
			heads [][]byte
			wg    sync.WaitGroup
		)
		for _, peer := range peers {
			wg.Go(func() {
				b, err := peerHead(ctx, hc, strings.TrimSuffix(peer, "/")+"/v1/heads/"+url.PathEscape(name))
				if err != nil {
					log.Warn("a peer replica gave no head", "peer", peer, "err", err)
					return
				}
				mu.Lock()
				heads = append(heads, b)
				mu.Unlock()
			})
		}
		wg.Wait()
		return heads
	}
}

func peerHead(ctx context.Context, hc *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, checkpoint.MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > checkpoint.MaxSize {
		return nil, fmt.Errorf("head over %d bytes", checkpoint.MaxSize)
	}
	return b, nil
}
