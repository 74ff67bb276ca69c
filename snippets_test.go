package pkie

import (
	"go/build"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// embedderDocs are the pages whose Go an application copies to embed
// pkie: it must compile outside this module.
var embedderDocs = []string{"docs/guides/client.md", "docs/guides/client-pec.md", "docs/guides/pkie-howto.md"}

// TestEmbedderSnippets: the Go in the embedders' pages imports no package
// under internal/ and names none by its package name (a snippet that
// calls builtin.Registry() without an import line compiles only inside
// this module, where it was written).
func TestEmbedderSnippets(t *testing.T) {
	public := map[string]bool{}
	internal := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == "." {
			return err
		}
		if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || path == "docs" {
			return filepath.SkipDir
		}
		if pkg, err := build.ImportDir(path, 0); err == nil {
			if strings.Contains("/"+filepath.ToSlash(path)+"/", "/internal/") {
				internal[pkg.Name] = true
			} else {
				public[pkg.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```")
	importPath := regexp.MustCompile(`"(github\.com/pkie/pkie[^"]*)"`)
	qualifier := regexp.MustCompile(`(?:^|[^\w.])([a-z][a-z0-9]*)\.[A-Z]`)
	for _, page := range embedderDocs {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks := block.FindAllSubmatch(doc, -1)
		if len(blocks) == 0 {
			t.Errorf("%s has no Go block", page)
		}
		for _, b := range blocks {
			code := string(b[1])
			for _, m := range importPath.FindAllStringSubmatch(code, -1) {
				if strings.Contains(m[1]+"/", "/internal/") {
					t.Errorf("%s imports %s", page, m[1])
				}
			}
			for _, m := range qualifier.FindAllStringSubmatch(code, -1) {
				name := m[1]
				if !internal[name] || public[name] || declares(code, name) {
					continue
				}
				t.Errorf("%s uses %s.…, a package under internal/ that code outside the module cannot import", page, name)
			}
		}
	}
	if !internal["builtin"] {
		t.Error("found no internal package named builtin: the walk missed internal/")
	}
}

// declares reports whether code declares name as a variable or parameter,
// so that name.X is a field or method, not a package.
func declares(code, name string) bool {
	return regexp.MustCompile(`(?m)(\b` + name + `\s*(,[\w\s,]*)?:?=|\b` + name + `\s+[*\[\]\w.]+[,)]|\bvar\s+` + name + `\b|,\s*` + name + `\s*:?=)`).MatchString(code)
}
