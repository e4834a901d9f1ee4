package redisrepo

import (
	"crypto/sha256"
	"encoding/hex"
)

// maxRawKey is the longest key written verbatim.
const maxRawKey = 64

// encodeKey is the rule that names a key in Redis. A key of 1 to 64 bytes of
// printable ASCII (0x21–0x7E) other than '{' and '}', and not starting with
// '#', is used as it is; any other key (empty, longer, binary, with spaces
// or braces) is replaced by '#' and the hex SHA-256 of its bytes. The two
// forms cannot collide: only hashed keys start with '#'. So a hostile key
// costs at most 65 bytes of key name and cannot break the hash tag.
func encodeKey(key string) string {
	if raw(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "#" + hex.EncodeToString(sum[:])
}

func raw(key string) bool {
	if len(key) == 0 || len(key) > maxRawKey || key[0] == '#' {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e || c == '{' || c == '}' {
			return false
		}
	}
	return true
}
