package treeproof

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client asks a prover server for proofs.
type Client struct {
	Base string       // e.g. "http://127.0.0.1:8443"
	HTTP *http.Client // nil: a client with a 5 s timeout
}

var defaultClient = &http.Client{Timeout: 5 * time.Second}

// CT fetches the CT proof for a certificate key (SHA-256 of its DER).
func (c *Client) CT(ctx context.Context, key [32]byte) (*Response, error) {
	return c.get(ctx, "/v1/ct/proof?key="+Key(key).String())
}

// Revocation fetches the revocation proof for a revocation key.
func (c *Client) Revocation(ctx context.Context, key [32]byte) (*Response, error) {
	return c.get(ctx, "/v1/revocation/proof?key="+Key(key).String())
}

func (c *Client) get(ctx context.Context, path string) (*Response, error) {
	hc := c.HTTP
	if hc == nil {
		hc = defaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.Base, "/")+path, nil)
	if err != nil {
		return nil, fmt.Errorf("prover: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prover: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("prover: reading response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.Unmarshal(body, &e)
		if e.Error == "" {
			e.Error = resp.Status
		}
		return nil, fmt.Errorf("prover: %s: %s", req.URL.Path, e.Error)
	}
	return ParseResponse(body)
}
