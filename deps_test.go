package pkie

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The packages an application embeds (check, pec, obc) must link client
// code only: no server, store, database driver or metrics library. An
// embedder pays for every package in the closure, in binary size and in
// what it trusts; and the closure is how server code would creep back in
// (docs/architecture.md, "Client and server halves").
const module = "github.com/pkie/pkie"

// clientPackages are the module's packages a client closure may hold.
// A new one must be added here on purpose, after checking that it is
// client code.
var clientPackages = []string{
	"", "check", "checkpoint", "obc", "pec", "pec/cloudbundle", "probe", "sortedtree",
	"internal/consensus", "internal/ctwire", "internal/notarywire", "internal/pecwire", "internal/termtext",
	"internal/pkies/builtin", "internal/pkies/conf", "internal/pkies/ct", "internal/pkies/notary",
	"internal/pkies/revocation", "internal/pkies/treeproof",
	// Real certificates' SCTs: parsing and verifying them, the browsers'
	// log lists and CT policies, and inclusion proofs from the logs.
	"internal/sct", "internal/loglist", "internal/sctpolicy", "internal/ctinclusion", "internal/lru",
	// pec.Listener, the server side of client-server PEC, names clients
	// with httplimit.ClientName; the package holds only the standard
	// library.
	"internal/httplimit",
}

// serverPackages name, for a clearer failure, the server packages that
// were in the client closure before the enhancements were split.
var serverPackages = []string{
	"cloud", "internal/cli", "internal/cloud", "internal/ctlog", "internal/feed", "internal/forwarder",
	"internal/notary", "internal/pgtest", "internal/prover", "internal/provers", "internal/revocation",
	"internal/store", "internal/testbed", "internal/ttpstate",
}

// deniedThirdParty are the database drivers and metrics libraries no
// client links, by import path prefix.
var deniedThirdParty = []string{
	"database/sql", "github.com/jackc/pgx", "github.com/lib/pq", "github.com/go-sql-driver", "github.com/mattn/go-sqlite3",
	"modernc.org/sqlite", "github.com/prometheus/",
}

// allowedThirdParty are exceptions by root: obc keeps its origin-bound
// keys in an SQLite file of the client's own (obc.Store), not yet moved
// to a format that needs no driver.
var allowedThirdParty = map[string][]string{
	"obc": {"database/sql", "modernc.org/sqlite"},
}

func TestClientDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, root := range []string{"check", "pec", "obc"} {
		out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", "./"+root).Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", root, err)
		}
		deps := strings.Fields(string(out))
		for _, p := range deps {
			if why := clientViolation(root, p); why != "" {
				t.Errorf("%s links %s: %s", root, p, why)
			}
		}
		t.Logf("%s: %d packages", root, len(deps))
	}
}

// clientViolation says why package p may not be in the closure of root,
// or "".
func clientViolation(root, p string) string {
	if p == module || strings.HasPrefix(p, module+"/") {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		for _, s := range serverPackages {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				return "a server package"
			}
		}
		if !slices.Contains(clientPackages, rel) {
			return "not a known client package (review it, then add it to clientPackages)"
		}
		return ""
	}
	for _, d := range deniedThirdParty {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") || (strings.HasSuffix(d, "/") && strings.HasPrefix(p, d)) {
			for _, a := range allowedThirdParty[root] {
				if p == a || strings.HasPrefix(p, a+"/") {
					return ""
				}
			}
			return "a database driver or metrics library"
		}
	}
	return ""
}
