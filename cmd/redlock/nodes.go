package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables read by the commands.
const (
	envNodes    = "REDLOCK_NODES"
	envPassword = "REDLOCK_PASSWORD"
)

// nodeKind is the kind of deployment one node is.
type nodeKind int

const (
	standalone nodeKind = iota // redis:// or rediss://
	sentinel                   // redis-sentinel:// or rediss-sentinel://
	cluster                    // redis-cluster:// or rediss-cluster://
)

// nodeSpec is one node as given on the command line: an independent Redis
// deployment. It holds the password; String and label never show it.
type nodeSpec struct {
	kind     nodeKind
	label    string         // for humans, without credentials
	opts     *redis.Options // standalone: parsed by redis.ParseURL
	addrs    []string       // sentinel: the sentinels; cluster: the seed nodes
	master   string         // sentinel: the master's name
	tls      *tls.Config    // sentinel, cluster: TLS to every server; nil: none
	username string
	password string
	// The sentinels' own credentials (sentinel_username and
	// sentinel_password); none when empty.
	sentinelUser, sentinelPass string
	// tlsFiles are the URL's TLS file options (tls_ca, tls_cert,
	// tls_key), which take the place of the flags'.
	tlsFiles tlsFiles
}

func (s *nodeSpec) String() string { return s.label }

// nodeFlags are the flags that say which nodes to use and how to reach them.
type nodeFlags struct {
	nodes        string
	passwordFile string
	timeout      time.Duration
	tls          tlsFiles // --tls-ca, --tls-cert, --tls-key
}

func (nf *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&nf.nodes, "nodes", "", "comma-separated Redis URLs of the independent nodes\n(redis://, rediss://, redis[s]-sentinel://, redis[s]-cluster://)\n(default $"+envNodes+")")
	fs.StringVar(&nf.passwordFile, "password-file", "", "file holding the password for nodes whose URL has none\n(default: the password in $"+envPassword+")")
	fs.DurationVar(&nf.timeout, "timeout", 2*time.Second, "how long to wait for a node to connect or answer a check")
	fs.StringVar(&nf.tls.ca, "tls-ca", "", "PEM file of the CA that signed the TLS nodes' certificates\n(default: the system's roots; a URL's tls_ca= takes its place)")
	fs.StringVar(&nf.tls.cert, "tls-cert", "", "PEM file of the client certificate, for TLS nodes that authenticate\nclients (tls-auth-clients yes); with --tls-key (a URL's tls_cert=)")
	fs.StringVar(&nf.tls.key, "tls-key", "", "PEM file of the client certificate's private key (a URL's tls_key=)")
}

// source says where the node list comes from, for messages.
func (nf *nodeFlags) source() string {
	if nf.nodes != "" {
		return "--nodes"
	}
	return envNodes
}

// given reports whether nodes were given, by flag or environment.
func (nf *nodeFlags) given() bool {
	return nf.nodes != "" || os.Getenv(envNodes) != ""
}

// resolve parses the node list and fills in the passwords. Its errors are
// usage errors and never contain a password. The returned secrets are every
// password in play; no output is scrubbed of them (lockedWriter says why).
func (nf *nodeFlags) resolve() ([]*nodeSpec, []string, error) {
	if err := positive("timeout", nf.timeout); err != nil {
		return nil, nil, err
	}
	list := nf.nodes
	if list == "" {
		list = os.Getenv(envNodes)
	}
	if strings.TrimSpace(list) == "" {
		return nil, nil, usagef("no nodes: give --nodes or set %s", envNodes)
	}
	specs, err := parseNodes(list)
	if err != nil {
		return nil, nil, usagef("%s: %v", nf.source(), err)
	}
	password, err := nf.password()
	if err != nil {
		return nil, nil, err
	}
	var secrets []string
	if password != "" {
		secrets = append(secrets, password)
	}
	if err := nf.applyTLS(specs); err != nil {
		return nil, nil, err
	}
	for _, s := range specs {
		if s.password == "" {
			s.password = password
		} else {
			secrets = append(secrets, s.password)
		}
		if s.opts != nil {
			s.opts.Password = s.password
		}
		if s.sentinelPass != "" {
			secrets = append(secrets, s.sentinelPass)
		}
	}
	return specs, secrets, nil
}

// password is the fallback password: the file's content (without the final
// line break) when --password-file is given, else REDLOCK_PASSWORD.
func (nf *nodeFlags) password() (string, error) {
	if nf.passwordFile == "" {
		return os.Getenv(envPassword), nil
	}
	b, err := os.ReadFile(nf.passwordFile)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", usagef("--password-file %s: %v", nf.passwordFile, err)
	}
	p := strings.TrimRight(string(b), "\r\n")
	if p == "" {
		return "", usagef("--password-file %s: the file is empty", nf.passwordFile)
	}
	if strings.ContainsAny(p, "\r\n") {
		return "", usagef("--password-file %s: the password spans several lines", nf.passwordFile)
	}
	return p, nil
}

// applyTLS loads the TLS files of the flags and of each node's URL into
// the nodes' TLS configurations. The flags apply to every TLS node; they
// are refused when no node uses TLS.
func (nf *nodeFlags) applyTLS(specs []*nodeSpec) error {
	anyTLS := false
	for _, s := range specs {
		c := s.tls
		if s.kind == standalone {
			c = s.opts.TLSConfig
		}
		if c == nil {
			continue
		}
		anyTLS = true
		files := nf.tls.over(s.tlsFiles)
		where := func(opt string) string {
			// The URL's option when it gave it, or gave others and
			// the flags not this one.
			if s.tlsFiles.has(opt) || s.tlsFiles.given() && !nf.tls.has(opt) {
				return opt
			}
			return flagName(opt)
		}
		if err := files.apply(c, where); err != nil {
			if s.tlsFiles.given() {
				return usagef("node %s: %v", s.label, err)
			}
			return usagef("%v", err)
		}
	}
	if nf.tls.given() && !anyTLS {
		return usagef("--tls-ca, --tls-cert and --tls-key are for TLS nodes, and no node is one: write rediss://")
	}
	return nil
}
