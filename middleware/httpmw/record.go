package httpmw

import (
	"encoding/binary"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/lockkit/lockkit/internal/exactlyonce"
)

// A stored response is an exactlyonce record of kind recordKind whose payload is:
//
//	[0:2]      status code, big endian
//	uvarint    number of header names, then per name:
//	             uvarint length, name; uvarint number of values; per value: uvarint length, value
//	rest       body
const recordKind = 'h'

// storable reports whether a response header is stored for replays. Hop-by-hop fields, Date,
// trailers and cookies are not: a replay must not hand out a session the first response set. A
// Content-Length the handler set is kept; otherwise net/http computes it again for the replay.
func storable(name string) bool {
	if strings.HasPrefix(name, http.TrailerPrefix) {
		return false
	}
	switch textproto.CanonicalMIMEHeaderKey(name) {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Date", "Set-Cookie",
		"Idempotent-Replayed":
		return false
	}
	return true
}

// appendRecordHead appends the envelope head (its fingerprint filled in later), the status and
// the storable headers of h.
func appendRecordHead(b []byte, status int, h http.Header) []byte {
	b = exactlyonce.AppendHead(b, recordKind)
	b = binary.BigEndian.AppendUint16(b, uint16(status))
	n := 0
	for k := range h {
		if storable(k) {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for k, vs := range h {
		if !storable(k) {
			continue
		}
		b = binary.AppendUvarint(exactlyonce.AppendField(b, k), uint64(len(vs)))
		for _, v := range vs {
			b = exactlyonce.AppendField(b, v)
		}
	}
	return b
}

// record is a stored response being read: the payload of an exactlyonce.Record.
type record struct {
	s      string
	status int
	body   string
}

// parseRecord checks a stored response and locates its parts, without copying.
func parseRecord(r *exactlyonce.Record) (record, bool) {
	s := r.Payload
	if r.Kind != recordKind || len(s) < 2 {
		return record{}, false
	}
	rec := record{s: s, status: int(s[0])<<8 | int(s[1])}
	end, ok := walkHeaders(s, nil)
	if !ok || rec.status < 100 || rec.status > 999 {
		return record{}, false
	}
	rec.body = s[end:]
	return rec, true
}

// setHeaders replaces the fields of h named in the record by the record's values.
func (rec *record) setHeaders(h http.Header) { walkHeaders(rec.s, h) }

// walkHeaders reads the header section of a payload; with a non-nil h it sets the fields in h. It
// returns where the body starts.
func walkHeaders(s string, h http.Header) (int, bool) {
	i := 2
	n, i, ok := uvarint(s, i)
	for ; ok && n > 0; n-- {
		var name string
		var nv uint64
		if name, i, ok = field(s, i); !ok {
			break
		}
		if nv, i, ok = uvarint(s, i); !ok || nv > uint64(len(s)-i) {
			return 0, false
		}
		var vals []string
		if h != nil {
			vals = make([]string, 0, nv)
		}
		for ; ok && nv > 0; nv-- {
			var v string
			if v, i, ok = field(s, i); ok && h != nil {
				vals = append(vals, v)
			}
		}
		if h != nil {
			h[name] = vals
		}
	}
	return i, ok
}

// uvarint decodes an unsigned varint of s at i.
func uvarint(s string, i int) (uint64, int, bool) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if i >= len(s) {
			return 0, i, false
		}
		c := s[i]
		i++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x, i, true
		}
	}
	return 0, i, false
}

// field reads a length-prefixed string of s at i.
func field(s string, i int) (string, int, bool) {
	n, i, ok := uvarint(s, i)
	if !ok || n > uint64(len(s)-i) {
		return "", i, false
	}
	return s[i : i+int(n)], i + int(n), true
}
