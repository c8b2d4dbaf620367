package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// testCA is a private certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
}

// newTestCA makes a CA and writes its certificate into dir.
func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue makes a certificate and key signed by the CA, for a server at
// 127.0.0.1 and localhost or for a client, and writes them into dir.
func (ca *testCA) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// freeTLSPort is a free loopback port for a server's TLS port.
func freeTLSPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestTLSClientAuthentication: nodes that serve TLS with a certificate of
// a private CA and authenticate clients (tls-auth-clients yes, Redis's
// default) are reached with --tls-ca, --tls-cert and --tls-key, or with
// the URL's tls_ca, tls_cert and tls_key (C3 of issue 49); without the
// CA or the client certificate, the error says which is missing.
func TestTLSClientAuthentication(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "private")
	serverCert, serverKey := ca.issue(t, dir, "server", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, dir, "client", x509.ExtKeyUsageClientAuth)
	stranger := newTestCA(t, dir, "stranger")
	strangerCert, strangerKey := stranger.issue(t, dir, "stranger-client", x509.ExtKeyUsageClientAuth)

	var urls []string
	for range 3 {
		port := freeTLSPort(t)
		redistest.Start(t, 1, redistest.Options{Args: []string{
			"--tls-port", strconv.Itoa(port),
			"--tls-cert-file", serverCert, "--tls-key-file", serverKey,
			"--tls-ca-cert-file", ca.file, "--tls-auth-clients", "yes",
		}})
		urls = append(urls, "rediss://127.0.0.1:"+strconv.Itoa(port))
	}
	nodes := "--nodes=" + strings.Join(urls, ",")
	files := []string{"--tls-ca", ca.file, "--tls-cert", clientCert, "--tls-key", clientKey}
	command := []string{"tls-lock", "--", "sh", "-c", "echo held"}

	r := runCLI(t, append(append([]string{"run", nodes, noGuard, wait}, files...), command...)...)
	if r.code != 0 || r.stdout != "held\n" {
		t.Errorf("run with --tls-ca, --tls-cert, --tls-key: %v", r)
	}
	q := url.Values{"tls_ca": {ca.file}, "tls_cert": {clientCert}, "tls_key": {clientKey}}.Encode()
	withOpts := make([]string, len(urls))
	for i, u := range urls {
		withOpts[i] = u + "?" + q
	}
	r = runCLI(t, append([]string{"run", "--nodes=" + strings.Join(withOpts, ","), noGuard, wait}, command...)...)
	if r.code != 0 || r.stdout != "held\n" {
		t.Errorf("run with the URL's tls_ca, tls_cert, tls_key: %v", r)
	}
	if r := runCLI(t, append([]string{"doctor", nodes}, files...)...); !strings.Contains(r.stdout, "answers PING") || strings.Contains(r.stdout, "TLS handshake failed") {
		t.Errorf("doctor over TLS: %v", r)
	}

	for _, c := range []struct {
		name  string
		flags []string
		says  string
	}{
		{"no client certificate", []string{"--tls-ca", ca.file}, "--tls-cert and --tls-key"},
		{"a client certificate of another CA", []string{"--tls-ca", ca.file, "--tls-cert", strangerCert, "--tls-key", strangerKey}, "TLS handshake failed"},
		{"no CA", []string{"--tls-cert", clientCert, "--tls-key", clientKey}, "--tls-ca"},
	} {
		r := runCLI(t, append(append([]string{"run", nodes, noGuard, "--timeout", "2s"}, c.flags...), command...)...)
		if r.code != exitUnavailable || !strings.Contains(r.stderr, c.says) || r.stdout != "" {
			t.Errorf("%s: want exit %d saying %q: %v", c.name, exitUnavailable, c.says, r)
		}
	}

	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{nodes, "--tls-cert", clientCert}, "--tls-cert " + clientCert + " needs --tls-key"},
		{[]string{nodes, "--tls-key", clientKey}, "needs --tls-cert"},
		{[]string{nodes, "--tls-ca", empty}, "no PEM certificate in it"},
		{[]string{nodes, "--tls-ca", filepath.Join(dir, "missing.pem")}, "no such file or directory"},
		{[]string{nodes, "--tls-cert", clientKey, "--tls-key", clientCert}, "--tls-cert"},
		{[]string{"--nodes=redis://127.0.0.1:1", "--tls-ca", ca.file}, "no node is one"},
		{[]string{"--nodes=redis://127.0.0.1:1?tls_ca=" + ca.file}, "write rediss://"},
		{[]string{"--nodes=" + urls[0] + "?tls_key=" + clientKey}, "tls_key " + clientKey + " needs tls_cert"},
	} {
		r := runCLI(t, append(append([]string{"run", noGuard}, c.args...), command...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.says) {
			t.Errorf("run %q: want exit %d saying %q: %v", c.args, exitUsage, c.says, r)
		}
	}
}
