package redistest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsMaterial is a test CA and a server certificate signed by it, written to
// PEM files for redis-server.
type tlsMaterial struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
}

// clientConfig returns a new client TLS configuration trusting the test CA.
func (m *tlsMaterial) clientConfig() *tls.Config {
	return &tls.Config{
		RootCAs:    m.pool,
		ServerName: "127.0.0.1",
		MinVersion: tls.VersionTLS12,
	}
}

// requireTLS skips the test if the redis-server binary at bin was built
// without TLS support. It starts redis-server with a TLS port and missing
// certificate files: a build with TLS fails to load the certificate, one
// without rejects the tls-port directive.
func requireTLS(t testing.TB, bin string) {
	t.Helper()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--port", "0", "--tls-port", "1", "--bind", "127.0.0.1",
		"--tls-cert-file", missing, "--tls-key-file", missing, "--tls-ca-cert-file", missing,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir)
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "Bad directive"):
		t.Skipf("redistest: WithTLS: %s was built without TLS support (it rejects --tls-port); "+
			"install a build with TLS, such as Debian's redis-server package", bin)
	case err == nil || ctx.Err() != nil:
		t.Fatalf("redistest: WithTLS: TLS support probe of %s did not fail as expected (err %v):\n%s", bin, err, out)
	}
}

// newTLSMaterial generates a CA and a server certificate for 127.0.0.1, ::1
// and localhost, and writes them to dir.
func newTLSMaterial(dir string) (*tlsMaterial, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Nodes of a TLS cluster also use this certificate as clients.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}

	m := &tlsMaterial{
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "server.pem"),
		keyFile:  filepath.Join(dir, "server-key.pem"),
		pool:     x509.NewCertPool(),
	}
	m.pool.AddCert(ca)
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{
		{m.caFile, "CERTIFICATE", caDER},
		{m.certFile, "CERTIFICATE", der},
		{m.keyFile, "PRIVATE KEY", keyDER},
	} {
		data := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(f.path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// serial returns a random 127-bit certificate serial number.
func serial() *big.Int {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails: crypto/rand crashes the program instead
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}
