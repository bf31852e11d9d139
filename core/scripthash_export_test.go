package core

import (
	"crypto/sha1"
	"encoding/hex"
)

// ScriptSHA1 is the SHA-1 (hex) by which EVALSHA names the script of source src, for tests that
// pick a script's calls out of the commands sent. lockkit itself computes no SHA-1 (FIPS 140-only
// mode): internal/script/hashes.go holds the hashes, checked against this.
func ScriptSHA1(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}
