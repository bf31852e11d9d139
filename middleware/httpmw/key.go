package httpmw

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
)

const (
	// keyHeader is the request header of the IETF draft "The Idempotency-Key HTTP Header Field".
	keyHeader = "Idempotency-Key"
	// maxKeyLen is the longest key accepted, after unquoting.
	maxKeyLen = 255
	// lockPrefix starts the names of Idempotency's locks.
	lockPrefix = "idem/"
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

// appendField appends s with its length, so that a sequence of fields has one encoding only.
func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// names returns the guard key (prefix{idem/HEX}) and the lock name (idem/HEX) of key in r's scope.
// HEX is the SHA-256 of the scope (method, route, caller) and the key: neither the key nor the
// caller's credentials reach Redis.
func (m *idempotency) names(r *http.Request, key string) (guard, name string) {
	var arr [256]byte
	b := appendField(arr[:0], r.Method)
	b = appendField(b, route(r))
	if m.o.scope != nil {
		b = append(b, 'p')
		b = appendField(b, m.o.scope(r))
	} else {
		vals := r.Header["Authorization"]
		b = binary.AppendUvarint(append(b, 'a'), uint64(len(vals)))
		for _, v := range vals {
			b = appendField(b, v)
		}
	}
	b = appendField(b, key)
	sum := sha256.Sum256(b)
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	guard = m.o.prefix + "{" + lockPrefix + string(hx[:]) + "}"
	return guard, guard[len(m.o.prefix)+1 : len(guard)-1]
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
	b := appendField(append(arr[:0], 'f', 1), uri)
	for _, name := range m.o.fpHeaders {
		vals := r.Header[name]
		b = binary.AppendUvarint(b, uint64(len(vals)))
		for _, v := range vals {
			b = appendField(b, v)
		}
	}
	h.Write(b)
	return h
}

// hashBody passes a request body to the handler while hashing it into the fingerprint. Close does
// not close the underlying body, so that the rest can still be hashed after the handler returns.
type hashBody struct {
	rc     io.ReadCloser
	h      hash.Hash
	closed bool
	eof    bool
}

func (b *hashBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.rc.Read(p)
	b.h.Write(p[:n])
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *hashBody) Close() error {
	b.closed = true
	return nil
}

// sum hashes what the handler left unread and returns the fingerprint.
func (b *hashBody) sum(buf []byte) ([sha256.Size]byte, error) {
	var fp [sha256.Size]byte
	if !b.eof {
		if _, err := io.CopyBuffer(b.h, b.rc, buf); err != nil {
			return fp, err
		}
	}
	b.h.Sum(fp[:0])
	return fp, nil
}
