package main

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
)

// hint says what to try after a failed command, or "" when nothing useful can be said. target
// names the server (password hidden).
func hint(err error, target string) string {
	msg := err.Error()
	var (
		op      *net.OpError
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		host    x509.HostnameError
	)
	switch {
	case strings.Contains(msg, "NOPERM"):
		return `the Redis user lacks a permission this command needs; docs/security.md ("The lockkit command's ACL") lists them`
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"):
		return "authenticate in the URL: --url redis://USER:PASSWORD@host:port (or REDIS_URL)"
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &host):
		return "--cacert FILE names the CA that signed the server's certificate (--insecure skips the check)"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the server does not speak TLS: use redis:// instead of rediss://"
	case strings.Contains(msg, "MOVED "), strings.Contains(msg, "CROSSSLOT"), strings.Contains(msg, "CLUSTERDOWN"):
		return "the server is a Redis Cluster node: add --cluster"
	case errors.As(err, &op) && op.Op == "dial":
		return "cannot reach " + target + ": is the server up, and is --url (or REDIS_URL) its address?"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), strings.Contains(msg, "connection reset"):
		return "the server at " + target + " closed the connection: if it uses TLS, connect with rediss://"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "no answer from " + target + " within --timeout: a slow, paused or unreachable server, " +
			"or TLS spoken to a plain-text server or the reverse (rediss:// is TLS, redis:// is not)"
	}
	return ""
}
