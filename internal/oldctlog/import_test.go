package oldctlog_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestImport(t *testing.T) {
	ctx := context.Background()
	_, chains := issue(t, 6)
	dir := t.TempDir()
	for i, c := range chains[:3] {
		var b []byte
		for _, der := range c {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
		}
		os.WriteFile(filepath.Join(dir, string(rune('a'+i))+".pem"), b, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "leaf.der"), chains[3][0], 0o644)
	os.WriteFile(filepath.Join(dir, "README.txt"), []byte("ignored"), 0o644)
	var jl strings.Builder
	for _, c := range append(chains[4:], chains[0]) {
		var req struct {
			Chain []string `json:"chain"`
		}
		for _, der := range c {
			req.Chain = append(req.Chain, base64.StdEncoding.EncodeToString(der))
		}
		b, _ := json.Marshal(req)
		jl.Write(append(b, '\n'))
	}

	l := newTestLog(t)
	st, err := l.ImportDir(ctx, dir, nil)
	if err != nil || st.Added != 4 {
		t.Fatalf("dir import: %+v %v", st, err)
	}
	st, err = l.ImportJSONLines(ctx, strings.NewReader(jl.String()), nil)
	if err != nil || st.Added != 2 || st.Duplicates != 1 {
		t.Fatalf("JSON-lines import: %+v %v", st, err)
	}
	if n, _ := l.Size(ctx); n != 6 {
		t.Fatalf("log size %d, want 6", n)
	}
	_, err = l.ImportJSONLines(ctx, strings.NewReader("\n{\"chain\":[\"AAAA\"]}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "bad.pem"), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o644)
	if _, err := l.ImportDir(ctx, dir, nil); err == nil || !strings.Contains(err.Error(), "bad.pem") {
		t.Errorf("bad file: %v", err)
	}
}
