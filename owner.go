package fencelock

import (
	"crypto/sha256"
	"encoding/base64"
)

// leaseID derives the public ID of a lease from its owner value (made by
// config.setRef): a truncated SHA-256, so it names the lease in logs and
// fences without revealing anything that would let its reader release or
// renew the lock.
func leaseID(owner string) string {
	const label = "fencelock lease id\x00"
	var buf [len(label) + MaxSecretLen]byte
	b := append(append(buf[:0], label...), owner...)
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}
