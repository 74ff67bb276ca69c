package forwarder

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

// An ephemeral identifier is the PEC paper's EphID = AES-GCM_k(ClientID)
// (§7, Equation 1) under a fresh random nonce, with an expiry sealed
// beside the client identifier:
//
//	EphID = version (0x01) ‖ nonce (12) ‖ AES-256-GCM(k, nonce, ClientID (4) ‖ expiry (uint64, Unix seconds), ad)
//	ad    = "pkie forwarder ephid v1" ‖ version
//
// 41 bytes. Only the holder of k can make one or read one: the forwarder
// keeps no table from identifiers to clients (it decrypts), and the cloud
// and the servers see random bytes that differ for every connection. The
// sealed expiry is what bounds the memory of used identifiers: an
// identifier past its expiry is refused whatever the memory says, so the
// memory may forget it then.
const (
	ephIDVersion = 1
	ephIDLabel   = "pkie forwarder ephid v1"
	// EphIDSize is the size of an ephemeral identifier.
	EphIDSize = 1 + 12 + 4 + 8 + 16
)

// ephIDs makes and opens ephemeral identifiers under one key.
type ephIDs struct{ aead cipher.AEAD }

func newEphIDs(key []byte) (*ephIDs, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("forwarder: identifier key of %d bytes, want 32", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &ephIDs{aead: g}, nil
}

func ephIDAD() []byte { return append([]byte(ephIDLabel), ephIDVersion) }

// issue returns a fresh identifier for client, good until expires.
func (e *ephIDs) issue(client pecwire.ClientID, expires time.Time) ([]byte, error) {
	out := make([]byte, 1+12, EphIDSize)
	out[0] = ephIDVersion
	if _, err := rand.Read(out[1:13]); err != nil {
		return nil, fmt.Errorf("forwarder: drawing a nonce: %w", err)
	}
	pt := binary.BigEndian.AppendUint64(client[:], uint64(expires.Unix()))
	return e.aead.Seal(out, out[1:13], pt, ephIDAD()), nil
}

var errBadEphID = errors.New("not an identifier this forwarder issued")

// open returns the client and expiry an identifier names, or
// errBadEphID for anything this forwarder's key did not seal.
func (e *ephIDs) open(id []byte) (pecwire.ClientID, time.Time, error) {
	var c pecwire.ClientID
	if len(id) != EphIDSize || id[0] != ephIDVersion {
		return c, time.Time{}, errBadEphID
	}
	pt, err := e.aead.Open(nil, id[1:13], id[13:], ephIDAD())
	if err != nil || len(pt) != 12 {
		return c, time.Time{}, errBadEphID
	}
	copy(c[:], pt[:4])
	exp := binary.BigEndian.Uint64(pt[4:])
	if exp > 1<<62 {
		return c, time.Time{}, errBadEphID
	}
	return c, time.Unix(int64(exp), 0), nil
}

// use is one identifier's use: the connection it names may receive up to
// left relayed messages until until (its proofs arrive one per
// enhancement, as the cloud finishes them).
type use struct {
	expires time.Time // the identifier's own expiry: forgettable after it
	until   time.Time
	left    int
}

// usedSet remembers the identifiers used, each until its sealed expiry,
// in at most max entries.
type usedSet struct {
	mu        sync.Mutex
	m         map[[16]byte]*use
	max       int
	window    time.Duration
	perUse    int
	lastSweep time.Time
}

func newUsedSet(max int, window time.Duration, perUse int) *usedSet {
	return &usedSet{m: map[[16]byte]*use{}, max: max, window: window, perUse: perUse}
}

func usedKey(id []byte) [16]byte {
	h := sha256.Sum256(id)
	return [16]byte(h[:16])
}

// Results of usedSet's methods.
var (
	errReused  = errors.New("this ephemeral identifier was used already")
	errExpired = errors.New("this ephemeral identifier has expired")
	errFull    = errors.New("the forwarder remembers too many identifiers in use: try later")
)

// open starts the one use of id (expiring at expires). It fails if id was
// used before.
func (u *usedSet) open(id []byte, expires, now time.Time) error {
	if !now.Before(expires) {
		return errExpired
	}
	k := usedKey(id)
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.m[k]; ok {
		return errReused
	}
	if len(u.m) >= u.max {
		u.sweepLocked(now, true)
		if len(u.m) >= u.max {
			return errFull
		}
	}
	u.m[k] = &use{expires: expires, until: now.Add(u.window), left: u.perUse}
	return nil
}

// relay counts one message relayed under id, starting its use if none
// has (client–server mode: the cloud's first proof is the first the
// forwarder sees of the identifier). It fails once the use is over: its
// window closed or its messages spent.
func (u *usedSet) relay(id []byte, expires, now time.Time) error {
	if !now.Before(expires) {
		return errExpired
	}
	k := usedKey(id)
	u.mu.Lock()
	e, ok := u.m[k]
	u.mu.Unlock()
	if !ok {
		if err := u.open(id, expires, now); err != nil && !errors.Is(err, errReused) {
			return err
		}
		u.mu.Lock()
		e = u.m[k]
		u.mu.Unlock()
		if e == nil {
			return errReused
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if now.After(e.until) || e.left <= 0 {
		return errReused
	}
	e.left--
	return nil
}

// sweepLocked forgets the uses of expired identifiers, at most once a
// second unless forced.
func (u *usedSet) sweepLocked(now time.Time, force bool) {
	if !force && now.Sub(u.lastSweep) < time.Second {
		return
	}
	u.lastSweep = now
	for k, e := range u.m {
		if !now.Before(e.expires) {
			delete(u.m, k)
		}
	}
}

func (u *usedSet) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.m)
}
