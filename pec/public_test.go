package pec_test

import (
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestExampleImportsArePublic: what an application copies to embed the
// dialer — ExampleDialer and the Go in docs/guides/client-pec.md — imports no
// package under internal/, which code outside this module cannot import.
// (The example's world, example_world_test.go, is the project's own
// testbed and not part of what is copied.)
func TestExampleImportsArePublic(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "example_test.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Imports) == 0 {
		t.Fatal("example_test.go imports nothing: not the example")
	}
	for _, im := range f.Imports {
		if path, _ := strconv.Unquote(im.Path.Value); isInternal(path) {
			t.Errorf("example_test.go imports %s", path)
		}
	}
	doc, err := os.ReadFile("../docs/guides/client-pec.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/guides/client-pec.md has no Go block")
	}
	imports := 0
	for _, b := range blocks {
		for _, m := range regexp.MustCompile(`"(github\.com/pkie/pkie[^"]*)"`).FindAllSubmatch(b[1], -1) {
			imports++
			if isInternal(string(m[1])) {
				t.Errorf("docs/guides/client-pec.md imports %s", m[1])
			}
		}
	}
	if imports == 0 {
		t.Error("docs/guides/client-pec.md's Go imports no pkie package: not the embedding example")
	}
}

func isInternal(path string) bool {
	return strings.Contains(path+"/", "/internal/")
}
