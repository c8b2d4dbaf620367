package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

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
	// go-redis refuses options it does not know: take ours out first.
	q := u.Query()
	files, err := takeTLSOptions(q)
	if err != nil {
		return nil, fmt.Errorf("node %q: %v", redact(raw), err)
	}
	if files.given() && u.Scheme != "rediss" {
		return nil, fmt.Errorf("node %q: TLS options in a redis:// URL: write rediss://", redact(raw))
	}
	parse := raw
	if files.given() {
		u.RawQuery = q.Encode()
		parse = u.String()
	}
	o, err := redis.ParseURL(parse)
	if err != nil {
		// go-redis's errors name the scheme, path or option at fault,
		// never the user information.
		return nil, fmt.Errorf("node %q: %v", redact(raw), err)
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
	return &nodeSpec{kind: standalone, label: label, opts: o, username: o.Username, password: o.Password, tlsFiles: files}, nil
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
	if s.tls != nil {
		if s.tlsFiles, err = takeTLSOptions(q); err != nil {
			return err
		}
	}
	supported := "skip_verify, tls_ca, tls_cert, tls_key (with TLS)"
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
