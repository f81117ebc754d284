package fencelock

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// newOwner returns an unguessable owner value: 16 random bytes. Only the
// holder knows it; compare-and-delete and renew need it.
func newOwner() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// leaseID derives the public ID of a lease from its owner value: a
// truncated SHA-256, so it names the lease in logs and fences without
// revealing anything that would let its reader release or renew the lock.
func leaseID(owner string) string {
	sum := sha256.Sum256([]byte("fencelock lease id\x00" + owner))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}
