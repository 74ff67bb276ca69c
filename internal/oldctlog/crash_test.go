package oldctlog_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/pkie/pkie/checkpoint"
	. "github.com/pkie/pkie/internal/oldctlog"
)

// TestHelperAppender is not a test: TestKillRestart runs the test binary
// with PKIE_CTLOG_HELPER_DIR set, and this adds certificates to that log,
// printing each acknowledged index, until it is killed.
func TestHelperAppender(t *testing.T) {
	dir := os.Getenv("PKIE_CTLOG_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	l, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	_, chains := issue(t, 400)
	for _, c := range chains {
		res, err := l.AddChain(context.Background(), c)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("ack %d %x\n", res.Index, res.Key)
	}
	os.Exit(0)
}

// TestKillRestart kills a process appending to the log with SIGKILL and
// checks that every certificate it acknowledged survives, with proofs that
// verify against a checkpoint the reopened log signed.
func TestKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	dir := t.TempDir()
	if _, err := Init(dir, "pkie.test/log"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAppender$")
	cmd.Env = append(os.Environ(), "PKIE_CTLOG_HELPER_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[uint64]string{}
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(acked) < 40 {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "ack" {
			i, _ := strconv.ParseUint(f[1], 10, 64)
			acked[i] = f[2]
		} else if f[0] == "error" {
			t.Fatalf("helper: %s", sc.Text())
		}
	}
	cmd.Process.Kill() // SIGKILL, mid-append
	cmd.Wait()
	if len(acked) < 40 {
		t.Fatalf("helper acknowledged only %d certificates", len(acked))
	}

	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	msg, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.Open(msg, l.Verifier(), l.Origin(), time.Hour, time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size < uint64(len(acked)) {
		t.Fatalf("after the kill the log has %d leaves, %d were acknowledged", cp.Size, len(acked))
	}
	for idx, key := range acked {
		es, err := l.Entries(ctx, idx, idx+1)
		if err != nil || len(es) != 1 {
			t.Fatalf("entry %d lost: %v", idx, err)
		}
		lf, _ := ParseLeaf(es[0].LeafInput)
		if got := fmt.Sprintf("%x", CertKey(lf.Data)); got != key {
			t.Fatalf("entry %d holds %s, %s was acknowledged", idx, got, key)
		}
		p, err := l.InclusionProof(ctx, idx, cp.Size)
		if err != nil {
			t.Fatal(err)
		}
		lh := LeafHash(es[0].LeafInput)
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, idx, cp.Size, lh[:], p, cp.Root[:]); err != nil {
			t.Fatalf("entry %d: %v", idx, err)
		}
	}
	// The reopened log keeps appending and building on the same tree.
	_, more := issue(t, 1)
	if _, err := l.AddChain(ctx, more[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := l.BuildSorted(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := l.Audit(ctx, AuditOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("audit after restart: %v %+v", err, rep)
	}
}
