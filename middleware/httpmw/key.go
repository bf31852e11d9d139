package httpmw

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
	"net/http"

	"github.com/lockkit/lockkit/internal/exactlyonce"
)

const (
	// keyHeader is the request header of the IETF draft "The Idempotency-Key HTTP Header Field".
	keyHeader = "Idempotency-Key"
	// maxKeyLen is the longest key accepted, after unquoting.
	maxKeyLen = 255
	// idemNamespace is the core namespace of Idempotency's locks.
	idemNamespace = "http-idem"
)

// parseKey returns the key carried by one Idempotency-Key field value. The draft makes the value a
// Structured Field String ("abc", with \" and \\ as the only escapes); clients that send the key
// bare (abc) are accepted too, with visible ASCII other than '"', '\' and ','. Either way the key is
// 1 to 255 printable ASCII characters; "abc" and abc are the same key. Surrounding spaces and tabs
// are ignored; parameters and lists are rejected.
func parseKey(v string) (string, bool) {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	if v == "" {
		return "", false
	}
	if v[0] != '"' {
		if len(v) > maxKeyLen {
			return "", false
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' || c == ',' {
				return "", false
			}
		}
		return v, true
	}
	var b []byte // the unescaped key, only when there are escapes
	start := 1
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			if i+1 == len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
				return "", false
			}
			if b == nil {
				b = make([]byte, 0, len(v))
			}
			b = append(b, v[start:i]...)
			start = i + 1 // the escaped character is kept
			i++
		case c == '"':
			if i != len(v)-1 {
				return "", false
			}
			k := v[1:i]
			if b != nil {
				k = string(append(b, v[start:i]...))
			}
			if len(k) == 0 || len(k) > maxKeyLen {
				return "", false
			}
			return k, true
		case c < 0x20 || c > 0x7e:
			return "", false
		}
	}
	return "", false // no closing quote
}

// scope returns the key of key in r's scope: the method, the route and the caller, which is the
// WithScope principal or else the credentials the request carries (exactlyonce.HTTPScope, which
// the lockkit command shares). The parts are length-prefixed and hashed (exactlyonce.Store.Key):
// neither the key nor the credentials reach Redis.
func (m *idempotency) scope(r *http.Request, key string) exactlyonce.Key {
	parts := exactlyonce.HTTPScope(r, route(r), m.o.scope, key)
	return m.store.Key(parts[:]...)
}

// fingerprint starts the fingerprint of r: its request URI and the configured headers. The caller
// writes the body into it.
func (m *idempotency) fingerprint(r *http.Request) hash.Hash {
	h := sha256.New()
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	var arr [128]byte
	b := exactlyonce.AppendField(append(arr[:0], 'f', 1), uri)
	for _, name := range m.o.fpHeaders {
		vals := r.Header[name]
		b = binary.AppendUvarint(b, uint64(len(vals)))
		for _, v := range vals {
			b = exactlyonce.AppendField(b, v)
		}
	}
	h.Write(b)
	return h
}

// hashBody passes a request body to the handler while hashing it into the fingerprint, up to a
// limit: the part past it is never read, and a read that reaches it fails with an
// *http.MaxBytesError. Close does not close the underlying body, so that the rest can still be
// hashed after the handler returns.
type hashBody struct {
	rc     io.ReadCloser
	h      hash.Hash
	limit  int64
	n      int64 // bytes read so far
	err    error // sticky: the limit was reached, or the body failed
	closed bool
	eof    bool
}

func (b *hashBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.read(p)
}

func (b *hashBody) read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if left := b.limit - b.n; int64(len(p)) > left+1 {
		p = p[:left+1] // one byte more tells a body at the limit from a longer one
	}
	n, err := b.rc.Read(p)
	if b.n+int64(n) > b.limit {
		n = int(b.limit - b.n)
		err = &http.MaxBytesError{Limit: b.limit}
	}
	b.n += int64(n)
	b.h.Write(p[:n])
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
	return n, err
}

func (b *hashBody) Close() error {
	b.closed = true
	return nil
}

// sum hashes what the handler left unread, up to the limit, and returns the fingerprint.
func (b *hashBody) sum(buf []byte) ([sha256.Size]byte, error) {
	var fp [sha256.Size]byte
	for !b.eof {
		if _, err := b.read(buf); err != nil && err != io.EOF {
			return fp, err
		}
	}
	b.h.Sum(fp[:0])
	return fp, nil
}
