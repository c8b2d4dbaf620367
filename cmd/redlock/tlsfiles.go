package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// tlsFiles are the files of a TLS client: the CA that signed the servers'
// certificates (none: the system's roots) and the client's certificate and
// key, for servers that authenticate clients (tls-auth-clients yes, Redis's
// default).
type tlsFiles struct {
	ca, cert, key string
}

// The query options of a node URL that name TLS files.
const (
	optTLSCA   = "tls_ca"
	optTLSCert = "tls_cert"
	optTLSKey  = "tls_key"
)

func (f tlsFiles) given() bool { return f.ca != "" || f.cert != "" || f.key != "" }

// has reports whether f gives the file of the option opt.
func (f tlsFiles) has(opt string) bool {
	switch opt {
	case optTLSCA:
		return f.ca != ""
	case optTLSCert:
		return f.cert != ""
	}
	return f.key != ""
}

// over is f with the files that o gives in its place.
func (f tlsFiles) over(o tlsFiles) tlsFiles {
	if o.ca != "" {
		f.ca = o.ca
	}
	if o.cert != "" {
		f.cert = o.cert
	}
	if o.key != "" {
		f.key = o.key
	}
	return f
}

// apply loads the files into c. Its errors name the file and what is
// wrong with it; where names the files' source (a flag, a URL option).
func (f tlsFiles) apply(c *tls.Config, where func(opt string) string) error {
	if f.ca != "" {
		b, err := os.ReadFile(f.ca)
		if err != nil {
			return fmt.Errorf("%s %s: %v", where(optTLSCA), f.ca, pathErr(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("%s %s: no PEM certificate in it", where(optTLSCA), f.ca)
		}
		c.RootCAs = pool
	}
	switch {
	case f.cert != "" && f.key == "":
		return fmt.Errorf("%s %s needs %s, the client certificate's key", where(optTLSCert), f.cert, where(optTLSKey))
	case f.key != "" && f.cert == "":
		return fmt.Errorf("%s %s needs %s, the client certificate", where(optTLSKey), f.key, where(optTLSCert))
	case f.cert != "":
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return fmt.Errorf("%s %s and %s %s: %v", where(optTLSCert), f.cert, where(optTLSKey), f.key, pathErr(err))
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return nil
}

// pathErr drops the path an *os.PathError repeats.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// takeTLSOptions removes the TLS file options from a URL's query and
// returns them; the rest of the query is left for go-redis's parser.
func takeTLSOptions(q url.Values) (tlsFiles, error) {
	var f tlsFiles
	for _, o := range []struct {
		name string
		to   *string
	}{{optTLSCA, &f.ca}, {optTLSCert, &f.cert}, {optTLSKey, &f.key}} {
		vals, ok := q[o.name]
		if !ok {
			continue
		}
		if len(vals) != 1 || vals[0] == "" {
			return f, fmt.Errorf("option %s wants one file name", o.name)
		}
		*o.to = vals[0]
		delete(q, o.name)
	}
	return f, nil
}

// flagName is where for the command line's TLS flags.
func flagName(opt string) string { return "--" + strings.ReplaceAll(opt, "_", "-") }
