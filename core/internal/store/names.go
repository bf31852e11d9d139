package store

import (
	"fmt"
	"strings"
)

// What a lock name, a namespace and an owner token may be (docs/keys.md: names reach keys and
// channels as given, inside the {NAME} hash tag).
const (
	MaxName      = 1024 // bytes of a lock name
	MaxNamespace = 64   // bytes of a namespace
	MaxToken     = 128  // bytes of an owner token
)

// NameProblem says what is wrong with name as a name given to Acquire, or "" when nothing is: 1 to
// MaxName bytes, not starting with '}' (it would empty the hash tag) nor '@' (namespaces).
func NameProblem(name string) string {
	switch {
	case name == "":
		return "name is empty"
	case len(name) > MaxName:
		return fmt.Sprintf("name is %d bytes, longer than %d", len(name), MaxName)
	case name[0] == '}':
		return "name must not start with '}' (it would empty the hash tag)"
	case name[0] == '@':
		return "name must not start with '@' (reserved for namespaces, see InNamespace)"
	}
	return ""
}

// ValidNamespace reports whether ns may name a namespace: 1 to MaxNamespace of a-z, 0-9 and '-',
// so that no name, whatever bytes it holds, can leave its namespace or reach another one.
func ValidNamespace(ns string) bool {
	const allowed = "abcdefghijklmnopqrstuvwxyz0123456789-"
	return ns != "" && len(ns) <= MaxNamespace && strings.Trim(ns, allowed) == ""
}

// FullNameProblem is NameProblem for a name given to Inspect or ForceRelease, which may also be
// the full name of a lock in a namespace, "@NAMESPACE/NAME".
func FullNameProblem(name string) string {
	if name == "" || name[0] != '@' {
		return NameProblem(name)
	}
	ns, rest, _ := strings.Cut(name[1:], "/")
	if !ValidNamespace(ns) || rest == "" || len(rest) > MaxName {
		return "a lock name starting with '@' must be a namespaced name, @NAMESPACE/NAME (see Namespaced)"
	}
	return ""
}

// TokenProblem says what is wrong with an owner token, or "" when nothing is: 1 to MaxToken
// bytes, no NUL byte, no control byte first (a byte 1 starts the mark of permits or read-write
// holds in a lock's value). It does not show the token (whoever knows it can release the lock).
func TokenProblem(token string) string {
	switch {
	case token == "" || len(token) > MaxToken:
		return fmt.Sprintf("token must be 1 to %d bytes, got %d", MaxToken, len(token))
	case strings.IndexByte(token, 0) >= 0:
		return "token must not contain a NUL byte"
	case token[0] < 0x20:
		return "token must not start with a control byte"
	}
	return ""
}

// HashTag returns the part of key that Redis Cluster hashes: the text between the first '{' and
// the first '}' after it, if that is not empty; otherwise the whole key.
func HashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// SameSlot reports whether Redis hashes key as it hashes the keys of the lock name (prefix{name}…),
// so that one script may touch both on a cluster. (A prefix has no braces.)
func SameSlot(key, name string) bool { return HashTag(key) == HashTag("{"+name+"}") }
