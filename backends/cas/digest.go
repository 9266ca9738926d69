package cas

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Digest names a blob as the Remote Execution API does: the lowercase hex SHA-256
// of its bytes and its size. The zero Digest is invalid; the empty blob's digest is
// EmptyDigest.
type Digest struct {
	Hash [sha256.Size]byte
	Size int64
}

// EmptyDigest is the digest of zero bytes, and so of the empty Directory message.
var EmptyDigest = Digest{Hash: sha256.Sum256(nil)}

// DigestOf returns the digest of b.
func DigestOf(b []byte) Digest { return Digest{Hash: sha256.Sum256(b), Size: int64(len(b))} }

// Hex returns the hash as 64 lowercase hex digits.
func (d Digest) Hex() string { return hex.EncodeToString(d.Hash[:]) }

// String returns "HASH/SIZE", the form REAPI tools print and ParseDigest reads.
func (d Digest) String() string { return d.Hex() + "/" + strconv.FormatInt(d.Size, 10) }

// IsZero reports whether d is the zero value (not a digest of anything).
func (d Digest) IsZero() bool { return d == Digest{} }

// ErrBadDigest is returned (wrapped) by ParseDigest for text that is not a digest.
var ErrBadDigest = errors.New("cas: malformed digest")

// ParseDigest reads "HASH/SIZE" (HASH 64 hex digits, either case; SIZE a decimal
// non-negative integer without sign or leading zeros).
func ParseDigest(s string) (Digest, error) {
	h, sz, ok := strings.Cut(s, "/")
	if !ok {
		return Digest{}, fmt.Errorf("%w: %q has no /SIZE", ErrBadDigest, trunc(s))
	}
	d, err := parseHash(h)
	if err != nil {
		return Digest{}, err
	}
	n, err := parseSize(sz)
	if err != nil {
		return Digest{}, fmt.Errorf("%w: %q: bad size", ErrBadDigest, trunc(s))
	}
	d.Size = n
	return d, nil
}

func parseHash(h string) (Digest, error) {
	var d Digest
	if len(h) != 2*sha256.Size {
		return Digest{}, fmt.Errorf("%w: hash %q is not 64 hex digits", ErrBadDigest, trunc(h))
	}
	if _, err := hex.Decode(d.Hash[:], []byte(h)); err != nil {
		return Digest{}, fmt.Errorf("%w: hash %q is not 64 hex digits", ErrBadDigest, trunc(h))
	}
	return d, nil
}

func parseSize(s string) (int64, error) {
	if s == "" || len(s) > 1 && s[0] == '0' || s[0] == '+' || s[0] == '-' {
		return 0, ErrBadDigest
	}
	return strconv.ParseInt(s, 10, 64)
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// hasher computes a Digest incrementally.
type hasher struct {
	h hash.Hash
	n int64
}

func newHasher() *hasher { return &hasher{h: sha256.New()} }

func (h *hasher) Write(b []byte) (int, error) {
	h.h.Write(b)
	h.n += int64(len(b))
	return len(b), nil
}

func (h *hasher) digest() Digest {
	var d Digest
	h.h.Sum(d.Hash[:0])
	d.Size = h.n
	return d
}
