package verify_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/internal/verify"
)

// The test binary doubles as a helper program: with PKIE_FAKE_HELPER set it
// speaks (or breaks) the helper protocol, so the client's handling of each
// failure is tested against a real process over real pipes.
func TestMain(m *testing.M) {
	if mode := os.Getenv("PKIE_FAKE_HELPER"); mode != "" {
		os.Exit(fakeHelper(mode))
	}
	os.Exit(m.Run())
}

// fakeHelper answers requests with crypto/x509 (mode "good") or
// misbehaves as mode says.
func fakeHelper(mode string) int {
	out := bufio.NewWriter(os.Stdout)
	hello := `{"protocol":"pkie-verify/1","backend":"fake","library":"fake 1"}`
	switch mode {
	case "badhello":
		hello = `{"protocol":"pkie-verify/0","backend":"fake"}`
	case "nohello":
		fmt.Fprintln(os.Stderr, "fake: cannot start: no library")
		return 1
	case "otherbackend":
		hello = `{"protocol":"pkie-verify/1","backend":"openssl","library":"x"}`
	}
	fmt.Fprintln(out, hello)
	out.Flush()
	switch mode {
	case "early":
		// Refuses after the first bytes of a request, then reads no more.
		buf := make([]byte, 16)
		io.ReadFull(os.Stdin, buf)
		fmt.Fprintln(out, `{"id":1,"error":"refused early"}`)
		out.Flush()
		time.Sleep(time.Hour)
	case "child":
		// Starts a child that holds standard error open, then hangs.
		c := exec.Command("sleep", "600")
		c.Stderr = os.Stderr
		c.Start()
		time.Sleep(time.Hour)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, verify.MaxRequestLine)
	g := verify.NewGo(false)
	n := 0
	for in.Scan() {
		n++
		var req struct {
			ID      uint64         `json:"id"`
			Roots   [][]byte       `json:"roots"`
			Chain   [][]byte       `json:"chain"`
			Host    string         `json:"host"`
			Time    int64          `json:"time"`
			Purpose verify.Purpose `json:"purpose"`
		}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(out, "{\"id\":0,\"error\":%q}\n", err.Error())
			out.Flush()
			continue
		}
		switch {
		case mode == "malformed":
			fmt.Fprintln(out, `{"id":`+fmt.Sprint(req.ID)+`,"valid":tru`)
		case mode == "crash" || (mode == "crashfirst" && n == 1 && os.Getenv("PKIE_FAKE_CRASHED") == ""):
			fmt.Fprintln(os.Stderr, "fake: segmentation fault in X509_verify_cert")
			return 139
		case mode == "hang":
			time.Sleep(time.Hour)
		case mode == "wrongid":
			fmt.Fprintf(out, `{"id":%d,"valid":true,"code":"ok","depth":2,"phases":{"roots_ns":1,"chain_ns":1,"verify_ns":1,"hostname_ns":0}}`+"\n", req.ID+1)
		case mode == "liar":
			fmt.Fprintf(out, `{"id":%d,"valid":true,"code":"expired","depth":2,"phases":{"roots_ns":1,"chain_ns":1,"verify_ns":1,"hostname_ns":0}}`+"\n", req.ID)
		case mode == "refuse":
			fmt.Fprintf(out, `{"id":%d,"error":"chain[0] is not base64"}`+"\n", req.ID)
		case mode == "long":
			fmt.Fprintf(out, `{"id":%d,"reason":"%s"}`+"\n", req.ID, strings.Repeat("a", verify.MaxAnswerLine+10))
		default:
			res, err := g.Verify(context.Background(), &verify.Request{Roots: req.Roots, Chain: req.Chain, Host: req.Host, Time: time.Unix(req.Time, 0), Purpose: req.Purpose})
			if err != nil {
				fmt.Fprintf(out, "{\"id\":%d,\"error\":%q}\n", req.ID, err.Error())
				break
			}
			b, _ := json.Marshal(map[string]any{"id": req.ID, "valid": res.Valid, "code": res.Code, "reason": res.Reason, "depth": res.Depth,
				"phases": map[string]int64{"roots_ns": int64(res.Phases.Roots), "chain_ns": int64(res.Phases.Chain), "verify_ns": int64(res.Phases.Verify), "hostname_ns": int64(res.Phases.Hostname)}})
			out.Write(append(b, '\n'))
		}
		out.Flush()
	}
	return 0
}

func startFake(t *testing.T, mode string, timeout time.Duration) (*verify.Helper, error) {
	t.Helper()
	t.Setenv("PKIE_FAKE_HELPER", mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h, err := verify.StartHelper(context.Background(), "fake", exe, timeout)
	if h != nil {
		t.Cleanup(func() { h.Close() })
	}
	return h, err
}

// chain returns a valid request for www.example.test.
func chain(t *testing.T) *verify.Request {
	t.Helper()
	root, err := testbed.NewRootCA("Helper Test Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("Helper Test Intermediate", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	return &verify.Request{Roots: [][]byte{root.Cert.Raw}, Chain: leaf.Chain, Host: "www.example.test", Time: time.Now(), Purpose: verify.Server}
}

func TestHelperGood(t *testing.T) {
	h, err := startFake(t, "good", 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.Library() != "fake 1" {
		t.Errorf("library %q", h.Library())
	}
	r := chain(t)
	res, err := h.Verify(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || res.Code != verify.OK || res.Depth != 3 || res.Backend != "fake" || res.Phases.Verify <= 0 || res.RoundTrip < res.Phases.Total() {
		t.Errorf("got %+v", res)
	}
	r.Host = "other.example.test"
	res, err = h.Verify(context.Background(), r)
	if err != nil || res.Valid || res.Code != verify.NameMismatch {
		t.Errorf("wrong host: %+v, %v", res, err)
	}
}

// Each way a helper can fail gives an error that says what happened, and
// never a verdict.
func TestHelperFailures(t *testing.T) {
	r := chain(t)
	for _, tc := range []struct {
		mode    string
		timeout time.Duration
		start   string // error from StartHelper, if it fails there
		verify  string // error from Verify
	}{
		{mode: "badhello", start: `speaks "pkie-verify/0"`},
		{mode: "nohello", start: "fake: cannot start: no library"},
		{mode: "otherbackend", start: `says it is "openssl"`},
		{mode: "malformed", verify: "answer is not JSON"},
		{mode: "crash", verify: "segmentation fault in X509_verify_cert"},
		{mode: "hang", timeout: 300 * time.Millisecond, verify: "no answer within 300ms; killed"},
		{mode: "wrongid", verify: "answer is for request 2, want 1"},
		{mode: "liar", verify: `valid=true with code "expired"`},
		{mode: "refuse", verify: "helper refused the request: chain[0] is not base64"},
		{mode: "long", verify: "line longer than"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			h, err := startFake(t, tc.mode, tc.timeout)
			if tc.start != "" {
				if err == nil || !strings.Contains(err.Error(), tc.start) {
					t.Fatalf("start: got %v, want %q", err, tc.start)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Verify(context.Background(), r)
			if err == nil || !strings.Contains(err.Error(), tc.verify) {
				t.Fatalf("verify: got %+v, %v; want error %q", res, err, tc.verify)
			}
			if res.Valid || res.Code != "" {
				t.Errorf("an error came with a verdict: %+v", res)
			}
		})
	}
}

// A helper that stops reading, or leaves a child holding its pipes, is
// still bounded by the timeout: pkie never waits on it for ever.
func TestHelperStuck(t *testing.T) {
	r := chain(t)
	// Over a pipe's 64 KiB, so the write blocks once the helper stops reading.
	for len(r.Roots) < 300 {
		r.Roots = append(r.Roots, r.Roots[0])
	}
	for _, tc := range []struct{ mode, want string }{
		{"early", "did not read the whole request within 300ms; killed"},
		{"child", "no answer within 300ms; killed"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			h, err := startFake(t, tc.mode, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, err := h.Verify(context.Background(), r); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want %q", err, tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Verify is still waiting on a stuck helper after 30 s")
			}
		})
	}
}

// A helper that crashed is replaced by a fresh one for the next request.
func TestHelperRestartsAfterCrash(t *testing.T) {
	h, err := startFake(t, "crashfirst", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := chain(t)
	if _, err := h.Verify(context.Background(), r); err == nil {
		t.Fatal("the first request should fail: the helper crashed")
	}
	t.Setenv("PKIE_FAKE_CRASHED", "1")
	res, err := h.Verify(context.Background(), r)
	if err != nil || !res.Valid {
		t.Fatalf("after restart: %+v, %v", res, err)
	}
}

func TestHelperCancel(t *testing.T) {
	h, err := startFake(t, "hang", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := h.Verify(ctx, chain(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
}

func TestOpenMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	bs, missing, err := verify.Open(context.Background(), verify.Options{Dirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer verify.CloseAll(bs)
	var names []string
	for _, b := range bs {
		names = append(names, b.Name())
	}
	if strings.Join(names, ",") != "go,go-parallel" || len(missing) != 2 || !strings.Contains(missing[0].Why, "not built: no pkie-verify-openssl") {
		t.Fatalf("opened %v, missing %+v", names, missing)
	}
	if _, _, err := verify.Open(context.Background(), verify.Options{Names: []string{"gnutls"}}); err == nil {
		t.Error("an unknown back end was accepted")
	}
}
