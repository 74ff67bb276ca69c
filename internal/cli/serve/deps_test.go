package serve

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServingRolesLinkNoTestbed: the serving roles are what operators run
// in production; the testbed (a throwaway CA, MitM, delay proxies), the
// demo and the benchmarks ship in the same binary for reproducible
// measurement (docs/architecture.md, "Benchmarks in the binary") but must
// stay out of the code a server runs.
func TestServingRolesLinkNoTestbed(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/pkie/pkie/internal/cli/serve").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		name, ok := strings.CutPrefix(dep, "github.com/pkie/pkie/internal/")
		if !ok {
			continue
		}
		if name == "testbed" || name == "demo" || name == "soak" || strings.HasSuffix(name, "bench") || strings.HasPrefix(name, "cli/bench") {
			t.Errorf("the serving commands link %s", dep)
		}
	}
}
