package ttpstate

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkie/pkie/checkpoint"
)

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.state")
	if _, err := Read(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	skey, vkey, _ := checkpoint.GenerateKey("ttpstate.test")
	s, _ := checkpoint.NewSigner(skey)
	v, _ := checkpoint.NewVerifier(vkey)
	msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: "ttpstate.test", Size: 7, Root: [32]byte{1}, Time: nowMilli()}, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(path, &State{Checkpoint: string(msg)}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v %v", fi.Mode(), err)
	}
	st, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := Open(st.Checkpoint, v, "ttpstate.test")
	if err != nil || cp.Size != 7 {
		t.Fatalf("%+v %v", cp, err)
	}
	if _, err := Open(st.Checkpoint, v, "other"); err == nil {
		t.Error("wrong origin accepted")
	}
	// Leftover temporaries match the pattern; the file itself does not.
	re := TempPattern(path)
	if !re.MatchString(".x.state.tmp-123") || re.MatchString("x.state") || re.MatchString(".x.state.tmp-12a") {
		t.Error("temp pattern")
	}
	big := *cp
	big.Size = 8
	if err := CheckExtends(cp, &big); err != nil {
		t.Errorf("larger tree refused: %v", err)
	}
	for _, got := range []checkpoint.Checkpoint{{Size: 6, Root: cp.Root}, {Size: 7, Root: [32]byte{2}}, {Size: 0}} {
		var re *RollbackError
		if err := CheckExtends(cp, &got); !errors.As(err, &re) {
			t.Errorf("size %d root %x: %v", got.Size, got.Root[:1], err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{``, `{}`, `{"version":1}`, `{"version":2,"checkpoint":"x"}`,
		`{"version":1,"checkpoint":"x","extra":1}`, `{"version":1,"checkpoint":"x"} {}`, `[]`} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	if _, err := Parse([]byte(`{"version":1,"checkpoint":"x"}`)); err != nil {
		t.Error(err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"checkpoint":"a\n1\nAA==\n","pending":"b"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err == nil && (s.Checkpoint == "" || s.Version != Version) {
			t.Fatalf("accepted %+v", s)
		}
	})
}

func nowMilli() time.Time { return time.UnixMilli(time.Now().UnixMilli()) }
