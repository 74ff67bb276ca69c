package cloud

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

// FileHPKE is the cloud's HPKE private key (X25519, hex), 0600: the key
// clients seal their submissions to when they reach the cloud through a
// privacy forwarder (PEC paper §7). Its public half is in the bundle.
const FileHPKE = "hpke.key"

// HPKEKeyID is the key id of the cloud's HPKE key in envelopes and in the
// bundle. One key per data directory: replicas that share the directory
// share it.
const HPKEKeyID = 1

// NewHPKEKey creates the HPKE key file in dir, refusing to overwrite one.
func NewHPKEKey(dir string) (hpke.PrivateKey, error) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeExcl(filepath.Join(dir, FileHPKE), []byte(hex.EncodeToString(priv.Bytes())+"\n"), 0o600); err != nil {
		return nil, err
	}
	return hpke.NewDHKEMPrivateKey(priv)
}

// loadHPKE reads the HPKE key of dir; nil without error when there is
// none (a data directory made before privacy forwarding: its cloud
// refuses sealed submissions until `pkie cloud init --new-hpke-key`).
func loadHPKE(dir string) (hpke.PrivateKey, error) {
	path := filepath.Join(dir, FileHPKE)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cloud: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("cloud: %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cloud: %w", err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("cloud: %s must hold 64 hex digits", path)
	}
	priv, err := hpke.DHKEM(ecdh.X25519()).NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("cloud: %s: %w", path, err)
	}
	return priv, nil
}

// LoadHPKE returns the data directory's HPKE key, or nil if it has none.
func (d *DataDir) LoadHPKE() (hpke.PrivateKey, error) { return loadHPKE(d.Dir) }

// sealFor returns what a job for a sealed submission sends instead of a
// Proof: the outcome sealed to the connection's key, under its
// ephemeral identifier.
func (c *Cloud) sealFor(key, ephID []byte) func(*pecwire.Proof) pecwire.Message {
	return func(p *pecwire.Proof) pecwire.Message {
		sealed, err := pecwire.SealProof(key, ephID, p)
		if err != nil {
			c.log.Error("sealing an outcome", "pkie", c.cfg.Registry.Name(p.ID), "err", err)
			return &pecwire.EphIDReject{EphID: ephID, Code: pecwire.RejectInvalid, Text: "the cloud could not seal an outcome"}
		}
		return &pecwire.SealedProof{EphID: ephID, Sealed: sealed}
	}
}

// wrap is the message that carries outcome p to the job's target.
func (j *job) wrap(p *pecwire.Proof) pecwire.Message {
	if j.seal == nil {
		return p
	}
	return j.seal(p)
}

// submitSealed handles a submission relayed by a privacy forwarder: it
// opens the envelope with the cloud's HPKE key and proves the chain, each
// outcome sealed to the connection's key and sent back on the session it
// came from, the forwarder's. The cloud never learns the client's address
// or identity, only the forwarder's and the ephemeral identifier. It
// returns false when from could not take an answer and is being dropped.
func (c *Cloud) submitSealed(from *session, m *pecwire.SealedSubmit) bool {
	received := time.Now()
	reject := func(code pecwire.RejectCode, text string) bool {
		c.m.submissions.WithLabelValues("rejected").Inc()
		c.m.rejects.WithLabelValues(code.String()).Inc()
		return from.push(&pecwire.EphIDReject{EphID: m.EphID, Code: code, Text: text})
	}
	if !c.allowSubmit(from) {
		return reject(pecwire.RejectLimited, "this session or address is over its rate of submissions")
	}
	if c.cfg.HPKEKey == nil {
		return reject(pecwire.RejectInvalid, "this cloud takes no sealed submissions (it has no HPKE key)")
	}
	key, sub, err := pecwire.OpenEnvelope(HPKEKeyID, c.cfg.HPKEKey, m.EphID, m.Envelope)
	if err != nil {
		c.log.Debug("sealed submission refused", "remote", from.conn.RemoteAddr().String(), "err", err)
		return reject(pecwire.RejectInvalid, "the sealed submission does not open with this cloud's key")
	}
	if len(sub.Requests) == 0 {
		return reject(pecwire.RejectInvalid, "the submission requests no enhancement")
	}
	if code := c.acquireJob(from.addr); code != 0 {
		if code == pecwire.RejectBusy {
			return reject(code, "too many submissions in flight: try another point of presence")
		}
		return reject(code, "this address has its share of submissions in flight")
	}
	certs, err := c.parseChain(sub.Chain)
	if err != nil {
		c.releaseJob(from.addr)
		return reject(pecwire.RejectInvalid, err.Error())
	}
	// The outcomes go back on the forwarder's own session: their places
	// in its queue are reserved first, as for a client's own submission.
	if !from.reserve(len(sub.Requests), true) {
		c.releaseJob(from.addr)
		return reject(pecwire.RejectLimited, "the forwarder's session has no room for more outcomes: read them first")
	}
	j := c.newJob(from, true, from.addr, sub, certs, received)
	j.seal = c.sealFor(key, m.EphID)
	c.m.submissions.WithLabelValues("sealed").Inc()
	c.wg.Go(func() { c.run(j) })
	return true
}

// parseChain parses a submitted chain through the certificate cache.
func (c *Cloud) parseChain(chain [][]byte) ([]*x509.Certificate, error) {
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		cert, err := c.certs.parse(der)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the chain does not parse", i)
		}
		certs[i] = cert
	}
	return certs, nil
}
