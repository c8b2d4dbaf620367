package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
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
}

func (s *nodeSpec) String() string { return s.label }

// nodeFlags are the flags that say which nodes to use and how to reach them.
type nodeFlags struct {
	nodes        string
	passwordFile string
	timeout      time.Duration
}

func (nf *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&nf.nodes, "nodes", "", "comma-separated Redis URLs of the independent nodes\n(redis://, rediss://, redis[s]-sentinel://, redis[s]-cluster://)\n(default $"+envNodes+")")
	fs.StringVar(&nf.passwordFile, "password-file", "", "file holding the password for nodes whose URL has none\n(default: the password in $"+envPassword+")")
	fs.DurationVar(&nf.timeout, "timeout", 2*time.Second, "how long to wait for a node to connect or answer a check")
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
// password in play, for scrubbing output.
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

// parseNodes splits a comma-separated list of node URLs. Sentinel and
// cluster URLs hold comma-separated hosts themselves: a piece without a
// scheme continues the URL before it.
func parseNodes(list string) ([]*nodeSpec, error) {
	var urls []string
	for piece := range strings.SplitSeq(list, ",") {
		piece = strings.TrimSpace(piece)
		if piece == "" {
			return nil, errors.New("empty node in the list")
		}
		if strings.Contains(piece, "://") {
			urls = append(urls, piece)
			continue
		}
		if n := len(urls); n > 0 && multiHost(urls[n-1]) {
			urls[n-1] += "," + piece
			continue
		}
		return nil, fmt.Errorf("node %q is not a URL: write redis://%s", redact(piece), redact(piece))
	}
	specs := make([]*nodeSpec, 0, len(urls))
	for _, u := range urls {
		s, err := parseNode(u)
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

func multiHost(u string) bool {
	scheme, _, _ := strings.Cut(u, "://")
	_, _, ok := multiScheme(scheme)
	return ok
}

// multiScheme tells the kind of a Sentinel or Cluster URL's scheme, and
// whether it asks for TLS.
func multiScheme(scheme string) (kind nodeKind, useTLS, ok bool) {
	switch scheme {
	case "redis-sentinel":
		return sentinel, false, true
	case "rediss-sentinel":
		return sentinel, true, true
	case "redis-cluster":
		return cluster, false, true
	case "rediss-cluster":
		return cluster, true, true
	}
	return 0, false, false
}

// parseNode parses one node URL. Its errors show the URL with the password
// replaced.
func parseNode(raw string) (*nodeSpec, error) {
	scheme, _, _ := strings.Cut(raw, "://")
	switch scheme {
	case "redis", "rediss":
		return parseStandalone(raw)
	}
	if _, _, ok := multiScheme(scheme); ok {
		return parseMulti(raw, scheme)
	}
	return nil, fmt.Errorf("node %q: unknown scheme %q (want redis, rediss, redis-sentinel, rediss-sentinel, redis-cluster or rediss-cluster)", redact(raw), scheme)
}

func parseStandalone(raw string) (*nodeSpec, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("node %q: %s", redact(raw), urlReason(raw, err))
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("node %q: no host", redact(raw))
	}
	if err := checkPort(u.Port()); err != nil {
		return nil, fmt.Errorf("node %q: %v", redact(raw), err)
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("node %q: %s", redact(raw), scrub(err.Error(), userinfoSecrets(u)))
	}
	o.ContextTimeoutEnabled = true
	if o.MaxRetries == 0 {
		o.MaxRetries = -1 // the lock client retries itself
	}
	label := o.Addr
	if o.DB != 0 {
		label += "/" + strconv.Itoa(o.DB)
	}
	if u.Scheme == "rediss" {
		label = "rediss://" + label
	}
	return &nodeSpec{kind: standalone, label: label, opts: o, username: o.Username, password: o.Password}, nil
}

// parseMulti parses redis[s]-sentinel://[user:password@]host:port[,host:port]/master[?options]
// and redis[s]-cluster://[user:password@]host:port[,host:port][?options].
// The user and password are the master's (the cluster nodes'); the options
// are sentinel_username and sentinel_password (the sentinels' own), and
// skip_verify=true (TLS without checking certificates).
func parseMulti(raw, scheme string) (*nodeSpec, error) {
	rest := strings.TrimPrefix(raw, scheme+"://")
	var userinfo string
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		userinfo, rest = rest[:i], rest[i+1:]
	}
	rest, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	kind, useTLS, _ := multiScheme(scheme)
	s := &nodeSpec{kind: kind}
	defPort := "6379"
	if kind == sentinel {
		defPort = "26379"
	}
	if useTLS {
		s.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if err := s.options(query, scheme); err != nil {
		return nil, fmt.Errorf("node %q: %v", redact(raw), err)
	}
	if userinfo != "" {
		u, err := url.Parse("redis://" + userinfo + "@host")
		if err != nil || u.User == nil {
			return nil, fmt.Errorf("node %q: bad user or password (percent-encode special characters)", redact(raw))
		}
		s.username = u.User.Username()
		s.password, _ = u.User.Password()
	}
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" {
			return nil, fmt.Errorf("node %q: empty host", redact(raw))
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = strings.Trim(h, "[]"), defPort
		}
		if host == "" || strings.ContainsAny(host, "/@ ") {
			return nil, fmt.Errorf("node %q: bad host %q", redact(raw), h)
		}
		if err := checkPort(port); err != nil {
			return nil, fmt.Errorf("node %q: %v", redact(raw), err)
		}
		s.addrs = append(s.addrs, net.JoinHostPort(host, port))
	}
	switch s.kind {
	case sentinel:
		s.master = strings.Trim(path, "/")
		if s.master == "" || strings.Contains(s.master, "/") {
			return nil, fmt.Errorf("node %q: want the master's name as the path: redis-sentinel://host:port[,host:port]/mastername", redact(raw))
		}
		s.label = fmt.Sprintf("sentinel %s (%s)", s.master, strings.Join(s.addrs, ","))
	case cluster:
		if strings.Trim(path, "/") != "" {
			return nil, fmt.Errorf("node %q: a cluster URL has no path", redact(raw))
		}
		s.label = fmt.Sprintf("cluster (%s)", strings.Join(s.addrs, ","))
	}
	if s.tls != nil {
		s.label += " over TLS"
	}
	return s, nil
}

// options applies the query of a Sentinel or Cluster URL. Its errors never
// quote a value: one may be a password.
func (s *nodeSpec) options(query, scheme string) error {
	if query == "" {
		return nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return errors.New("bad options: not a valid URL query (percent-encode special characters)")
	}
	supported := "skip_verify (with TLS)"
	if s.kind == sentinel {
		supported = "sentinel_username, sentinel_password, " + supported
	}
	for name, vals := range q {
		if len(vals) != 1 {
			return fmt.Errorf("option %s is given %d times", name, len(vals))
		}
		v := vals[0]
		switch {
		case s.kind == sentinel && name == "sentinel_username":
			s.sentinelUser = v
		case s.kind == sentinel && name == "sentinel_password":
			s.sentinelPass = v
		case name == "skip_verify" && s.tls != nil:
			skip, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("option skip_verify: want true or false")
			}
			s.tls.InsecureSkipVerify = skip
		default:
			return fmt.Errorf("option %s is not supported in %s URLs (supported: %s)", name, scheme, supported)
		}
	}
	return nil
}

func checkPort(port string) error {
	if port == "" {
		return nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// urlReason explains a url.Parse error without the URL itself, which may
// hold a password; the parser's own reason may quote a piece of the
// userinfo, so it is left out when there is one.
func urlReason(raw string, err error) string {
	if strings.Contains(raw, "@") {
		return "not a valid URL (percent-encode special characters in the user and password)"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "not a valid URL: " + ue.Err.Error()
	}
	return "not a valid URL"
}

// redact returns a URL, valid or not, with its passwords replaced by
// "xxxxx": everything between "user:" and the last '@', and the value of a
// sentinel_password option.
func redact(raw string) string {
	const key = "sentinel_password="
	for from := 0; ; {
		i := strings.Index(raw[from:], key)
		if i < 0 {
			break
		}
		start := from + i + len(key)
		end := len(raw)
		if j := strings.IndexAny(raw[start:], "&,"); j >= 0 {
			end = start + j
		}
		raw = raw[:start] + "xxxxx" + raw[end:]
		from = start + len("xxxxx")
	}
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 && i < at {
		start = i + 3
	}
	userinfo := raw[start:at]
	user, _, hasPass := strings.Cut(userinfo, ":")
	if !hasPass {
		return raw
	}
	return raw[:start] + user + ":xxxxx" + raw[at:]
}

func userinfoSecrets(u *url.URL) []string {
	if u.User == nil {
		return nil
	}
	p, _ := u.User.Password()
	return []string{p}
}

// scrub replaces every secret in s. Secrets shorter than minSecret are
// left: replacing them would garble the output without hiding anything.
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= minSecret {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	return s
}

const minSecret = 4

// scrubWriter removes secrets from what the commands print themselves (not
// from a child's output), as a second line of defence behind never
// formatting a password. It serializes writes, so that the command's
// messages and a child's copied output do not interleave mid-line.
type scrubWriter struct {
	mu      *sync.Mutex
	w       io.Writer
	secrets []string
}

func (s scrubWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := scrub(string(p), s.secrets)
	if _, err := io.WriteString(s.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// open returns a go-redis client for the node, with context deadlines
// honoured and timeout as the dial timeout. The caller must close it.
func (s *nodeSpec) open(timeout time.Duration) redis.UniversalClient {
	switch s.kind {
	case sentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            s.master,
			SentinelAddrs:         s.addrs,
			SentinelUsername:      s.sentinelUser,
			SentinelPassword:      s.sentinelPass,
			Username:              s.username,
			Password:              s.password,
			TLSConfig:             s.tls,
			DialTimeout:           timeout,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
		})
	case cluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 s.addrs,
			Username:              s.username,
			Password:              s.password,
			TLSConfig:             s.tls,
			DialTimeout:           timeout,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
		})
	}
	o := *s.opts
	if o.DialTimeout == 0 {
		o.DialTimeout = timeout
	}
	return redis.NewClient(&o)
}

// sentinelClient returns a client for the i-th sentinel of a Sentinel
// node. The caller must close it.
func (s *nodeSpec) sentinelClient(i int, timeout time.Duration) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{
		Addr:                  s.addrs[i],
		Username:              s.sentinelUser,
		Password:              s.sentinelPass,
		TLSConfig:             s.tls,
		DialTimeout:           timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
}

// conn is an open node.
type conn struct {
	spec *nodeSpec
	rc   redis.UniversalClient
}

func openAll(specs []*nodeSpec, timeout time.Duration) []conn {
	conns := make([]conn, len(specs))
	for i, s := range specs {
		conns[i] = conn{spec: s, rc: s.open(timeout)}
	}
	return conns
}

func closeAll(conns []conn) {
	for _, c := range conns {
		_ = c.rc.Close()
	}
}

func clients(conns []conn) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(conns))
	for i, c := range conns {
		out[i] = c.rc
	}
	return out
}

// pingAll pings every node in parallel, each within timeout, and returns
// each node's error.
func pingAll(ctx context.Context, conns []conn, timeout time.Duration) []error {
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = c.rc.Ping(pctx).Err()
		})
	}
	wg.Wait()
	return errs
}

// reachable pings the nodes and, when fewer than a quorum answer, returns
// an error that lists each failed node.
func reachable(ctx context.Context, conns []conn, timeout time.Duration) error {
	errs := pingAll(ctx, conns, timeout)
	var bad []string
	for i, err := range errs {
		if err != nil {
			bad = append(bad, fmt.Sprintf("node %d (%s): %v", i, conns[i].spec, nodeErr(err)))
		}
	}
	need := len(conns)/2 + 1
	if len(conns)-len(bad) >= need {
		return nil
	}
	return fmt.Errorf("%d of %d nodes answered, %d needed: %s", len(conns)-len(bad), len(conns), need, strings.Join(bad, "; "))
}

// nodeErr shortens the error of a request to a node.
func nodeErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("no answer in time")
	}
	return err
}

// outputs are the writers of one command: its own messages go through
// scrubWriters; a child's output goes to the original files, or through
// the same lock when they are not files, so that writes never race.
type outputs struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
}

func newOutputs(stdout, stderr io.Writer) *outputs {
	return &outputs{stdout: stdout, stderr: stderr}
}

// own returns the writers for the command's own messages.
func (o *outputs) own(secrets []string) (stdout, stderr io.Writer) {
	return scrubWriter{&o.mu, o.stdout, secrets}, scrubWriter{&o.mu, o.stderr, secrets}
}

// child returns the writers for a child process.
func (o *outputs) child() (stdout, stderr io.Writer) {
	wrap := func(w io.Writer) io.Writer {
		if f, ok := w.(*os.File); ok {
			return f
		}
		return scrubWriter{&o.mu, w, nil}
	}
	return wrap(o.stdout), wrap(o.stderr)
}
