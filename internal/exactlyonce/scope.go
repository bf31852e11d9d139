package exactlyonce

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
)

// Hash is the name Store.Key gives the unit of work identified by parts: the hex SHA-256 of the
// parts, each length-prefixed. The lock is "@NS/HASH" and the record "RECORDS{@NS/HASH}".
func Hash(parts ...string) string {
	var arr [512]byte
	b := arr[:0]
	b = binary.AppendUvarint(b, uint64(len(parts)))
	for _, p := range parts {
		b = AppendField(b, p)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// HTTPScope returns the parts that scope the idempotency key key of the HTTP request r, as httpmw
// keys it (pass them to Store.Key, or Hash): the method, route (httpmw's: the ServeMux pattern,
// or the path outside a route), and the caller, which is principal(r) when principal is not nil
// (httpmw.WithScope), or else the credentials r carries: every Authorization and Cookie header
// value and the SHA-256 of the client certificate. The lockkit command computes a record's name
// with it (lockkit idem --method ... KEY), so both read a request the same way.
func HTTPScope(r *http.Request, route string, principal func(*http.Request) string, key string) [7]string {
	if principal != nil {
		return [7]string{r.Method, route, "principal", principal(r), "", "", key}
	}
	var cert string
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
		cert = string(sum[:])
	}
	return [7]string{r.Method, route, "credentials", headerValues(r.Header["Authorization"]),
		headerValues(r.Header["Cookie"]), cert, key}
}

// headerValues encodes the values of a header field as one part: their number, then each value.
func headerValues(vals []string) string {
	if len(vals) == 0 {
		return ""
	}
	b := binary.AppendUvarint(nil, uint64(len(vals)))
	for _, v := range vals {
		b = AppendField(b, v)
	}
	return string(b)
}
