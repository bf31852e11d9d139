package exactlyonce

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"

	"github.com/lockkit/lockkit/core"
)

// Key names one unit of work: the lock held while it runs and the record its outcome is stored in.
// The record key carries the lock's hash tag, so core checks it in the acquire script
// (core.WithGuard) and writes it in the release script (Lock.ReleaseSet), in the lock's cluster
// slot.
type Key struct {
	name   string // the lock's name inside the Store's namespace
	lock   string // the full lock name, core.Namespaced(ns, name)
	record string
}

// Lock returns the full lock name ("@NS/NAME"), as core.Lock.Name reports it.
func (k Key) Lock() string { return k.lock }

// Record returns the Redis key of the stored outcome.
func (k Key) Record() string { return k.record }

// Key derives the key of a unit of work identified by parts: a scope (method, route, caller's
// credentials...) and the client's key. Each part is length-prefixed and the whole hashed with
// SHA-256, so no part can spill into another and no part (credentials, the client's key) reaches
// Redis: the lock is "@NS/HEX" and the record "RECORDS{@NS/HEX}".
func (s *Store) Key(parts ...string) Key {
	return s.KeyNamed(Hash(parts...), "")
}

// KeyNamed is the key of work the application names itself (a cron job): the lock is name in the
// Store's namespace, and the record key is the lock's hash tag followed by suffix, so that one
// lock can guard several records (one per tick).
func (s *Store) KeyNamed(name, suffix string) Key {
	lock := core.Namespaced(s.cfg.Namespace, name)
	return Key{name: name, lock: lock, record: s.cfg.RecordPrefix + "{" + lock + "}" + suffix}
}

// AppendField appends s with its length, so that a sequence of fields has one encoding only.
func AppendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// The record envelope, one Redis string:
//
//	[0]      format version, 2
//	[1:33]   fingerprint of the request (SHA-256)
//	[33]     kind, chosen by the adapter ('h' an HTTP response, 'r' a gRPC response, 's' a gRPC
//	         status, 'm' a cron marker)
//	[34:]    payload, in the adapter's format
//
// Version 1 was httpmw's own format and "lkg1" grpcmw's; both lived under other keys
// (lockkit:idem:{idem/HEX}, lockkit:idem:{grpc-idem/HEX}) that the namespaced names never look up,
// so records of the old formats are ignored, not read: they expire after their retention. A record
// of another version found under a new key is reported as ErrUnreadable.
const (
	version = 2
	// HeadLen is the length of the envelope before the payload.
	HeadLen = 1 + sha256.Size + 1
)

// ErrUnreadable means a stored record is too short or of an unknown version.
var ErrUnreadable = errors.New("lockkit: exactlyonce: stored record unreadable")

// Record is a stored outcome.
type Record struct {
	// Fingerprint identifies the request that produced the outcome.
	Fingerprint [sha256.Size]byte
	// Kind says how Payload is encoded.
	Kind byte
	// Payload is the outcome in the adapter's format.
	Payload string
}

// AppendHead starts a record of kind in b: the version, a zero fingerprint (SetFingerprint fills it
// in once the request is fully read) and the kind. The payload follows.
func AppendHead(b []byte, kind byte) []byte {
	var zero [sha256.Size]byte
	return append(append(append(b, version), zero[:]...), kind)
}

// SetFingerprint writes fp into the record rec started by AppendHead.
func SetFingerprint(rec []byte, fp [sha256.Size]byte) { copy(rec[1:1+sha256.Size], fp[:]) }

// Encode returns a whole record.
func Encode(kind byte, fp [sha256.Size]byte, payload []byte) []byte {
	b := AppendHead(make([]byte, 0, HeadLen+len(payload)), kind)
	SetFingerprint(b, fp)
	return append(b, payload...)
}

// Decode parses a stored record without copying its payload.
func Decode(s string) (Record, error) {
	if len(s) < HeadLen || s[0] != version {
		return Record{}, ErrUnreadable
	}
	var r Record
	copy(r.Fingerprint[:], s[1:])
	r.Kind, r.Payload = s[HeadLen-1], s[HeadLen:]
	return r, nil
}
