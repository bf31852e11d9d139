package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/lockkit/lockkit/internal/exactlyonce"
)

// httpRequest is the request whose idempotency record idem reads, described by flags: httpmw
// scopes a client's Idempotency-Key by the method, the route and the caller, and names the record
// by their hash (exactlyonce.HTTPScope, shared with httpmw).
type httpRequest struct {
	method, route string
	headers       []string // "Name: value"
	cert          string   // PEM file of the client certificate
	principal     *string  // httpmw.WithScope's principal
}

func (r *httpRequest) register(fs *flag.FlagSet) {
	fs.StringVar(&r.method, "method", "", "with --route: KEY is the client's Idempotency-Key of an HTTP request with this `METHOD` (POST), "+
		"not a record's hash")
	fs.StringVar(&r.route, "route", "", "the `ROUTE` httpmw saw: the ServeMux pattern of the handler (\"POST /orders/{id}\"), "+
		"or the request's path outside a pattern")
	fs.Func("header", "a header of the request, `'NAME: VALUE'` (repeatable): its Authorization and Cookie values are the "+
		"caller's credentials that httpmw scopes keys by; other headers are ignored", func(v string) error {
		name, _, ok := strings.Cut(v, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return errors.New("want 'NAME: VALUE'")
		}
		r.headers = append(r.headers, v)
		return nil
	})
	fs.StringVar(&r.cert, "cert", "", "PEM `FILE` of the client certificate the request was sent with (mutual TLS)")
	fs.Func("principal", "the `PRINCIPAL` httpmw.WithScope returned for the request (instead of --header and --cert)", func(v string) error {
		r.principal = &v
		return nil
	})
}

// given reports whether a flag describes a request.
func (r *httpRequest) given() bool {
	return r.method != "" || r.route != "" || len(r.headers) > 0 || r.cert != "" || r.principal != nil
}

// hash returns the name httpmw gives the record of the client's key in the request's scope.
func (r *httpRequest) hash(key string) (string, error) {
	if r.method == "" || r.route == "" {
		return "", errors.New("--method and --route both describe the request (and --header, --cert or --principal its caller)")
	}
	if r.principal != nil && (len(r.headers) > 0 || r.cert != "") {
		return "", errors.New("--principal replaces the credentials: give it without --header and --cert")
	}
	req := &http.Request{Method: r.method, Header: http.Header{}}
	for _, h := range r.headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Add(strings.TrimSpace(name), strings.TrimLeft(value, " \t"))
	}
	if r.cert != "" {
		b, err := os.ReadFile(r.cert)
		if err != nil {
			return "", fmt.Errorf("--cert: %w", err)
		}
		block, _ := pem.Decode(b)
		if block == nil || block.Type != "CERTIFICATE" {
			return "", fmt.Errorf("--cert %s: no PEM certificate found", r.cert)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return "", fmt.Errorf("--cert %s: %w", r.cert, err)
		}
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
	}
	var principal func(*http.Request) string
	if r.principal != nil {
		p := *r.principal
		principal = func(*http.Request) string { return p }
	}
	parts := exactlyonce.HTTPScope(req, r.route, principal, key)
	return exactlyonce.Hash(parts[:]...), nil
}
