package server

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"github.com/pkie/pkie/internal/atomicfile"
)

// LoadKeyFile reads a Binder key from path: standard base64 on one line
// (docs/formats/notary-and-tools.md, "Channel-bound cookies"), decoding to at least
// MinKeySize bytes. A file that its group or others may read or write is
// refused, as ssh refuses such a private key: whoever reads the key can
// forge cookies bound to any client.
func LoadKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("obc/server: binder key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("obc/server: binder key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("obc/server: binder key %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("obc/server: binder key %s has mode %#o: others than its owner may read it; chmod 600 it (and make a new key if anyone did)", path, perm)
	}
	buf := make([]byte, 1024)
	n, err := f.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("obc/server: binder key %s: %w", path, err)
	}
	if n == len(buf) {
		return nil, fmt.Errorf("obc/server: binder key %s is larger than %d bytes; want one base64 line", path, len(buf)-1)
	}
	key, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(buf[:n])))
	if err != nil {
		return nil, fmt.Errorf("obc/server: binder key %s is not one line of base64: %w", path, err)
	}
	if len(key) < MinKeySize {
		return nil, fmt.Errorf("obc/server: binder key %s has %d bytes, want at least %d", path, len(key), MinKeySize)
	}
	return key, nil
}

// LoadOrCreateKeyFile returns the Binder key in path, first creating the
// file (mode 0600, MinKeySize random bytes) if it does not exist. created
// reports whether it did.
func LoadOrCreateKeyFile(path string) (key []byte, created bool, err error) {
	key, err = LoadKeyFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	key = make([]byte, MinKeySize)
	rand.Read(key)
	line := base64.StdEncoding.EncodeToString(key) + "\n"
	if err := atomicfile.CreateExclusive(path, []byte(line), 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Created by another process since: use its key.
			key, err = LoadKeyFile(path)
			return key, false, err
		}
		return nil, false, fmt.Errorf("obc/server: binder key: %w", err)
	}
	return key, true, nil
}
