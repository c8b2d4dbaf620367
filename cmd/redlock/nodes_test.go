package main

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestParseNodes(t *testing.T) {
	tests := []struct {
		list   string
		labels []string
		kinds  []nodeKind
	}{
		{"redis://10.0.0.1:6379", []string{"10.0.0.1:6379"}, []nodeKind{standalone}},
		{"redis://a:1, redis://b:2/3,rediss://c:4", []string{"a:1", "b:2/3", "rediss://c:4"}, []nodeKind{standalone, standalone, standalone}},
		{"redis://h", []string{"h:6379"}, []nodeKind{standalone}},
		{
			"redis-sentinel://:pw@s1:26379,s2:26380/mymaster,redis://x:1",
			[]string{"sentinel mymaster (s1:26379,s2:26380)", "x:1"},
			[]nodeKind{sentinel, standalone},
		},
		{"redis-sentinel://s1,s2/m", []string{"sentinel m (s1:26379,s2:26379)"}, []nodeKind{sentinel}},
		{
			"redis-cluster://c1:7000,c2:7001,redis-cluster://d1:7000",
			[]string{"cluster (c1:7000,c2:7001)", "cluster (d1:7000)"},
			[]nodeKind{cluster, cluster},
		},
		{"redis://[::1]:6379", []string{"[::1]:6379"}, []nodeKind{standalone}},
		{
			"rediss-sentinel://s1/m?sentinel_password=x&skip_verify=true,rediss-cluster://c1:7000,c2",
			[]string{"sentinel m (s1:26379) over TLS", "cluster (c1:7000,c2:6379) over TLS"},
			[]nodeKind{sentinel, cluster},
		},
	}
	for _, tt := range tests {
		specs, err := parseNodes(tt.list)
		if err != nil {
			t.Errorf("parseNodes(%q): %v", tt.list, err)
			continue
		}
		var labels []string
		var kinds []nodeKind
		for _, s := range specs {
			labels = append(labels, s.label)
			kinds = append(kinds, s.kind)
		}
		if !slices.Equal(labels, tt.labels) || !slices.Equal(kinds, tt.kinds) {
			t.Errorf("parseNodes(%q) = %q %v, want %q %v", tt.list, labels, kinds, tt.labels, tt.kinds)
		}
	}
}

func TestParseNodesCredentials(t *testing.T) {
	specs, err := parseNodes("redis://alice:p%40ss@a:1,redis-sentinel://bob:s3cr3t@s:1/m,redis-cluster://:c1u5ter@c:1,redis://b:2")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"alice", "p@ss"}, {"bob", "s3cr3t"}, {"", "c1u5ter"}, {"", ""}}
	for i, s := range specs {
		if s.username != want[i][0] || s.password != want[i][1] {
			t.Errorf("node %d: user %q password %q, want %q %q", i, s.username, s.password, want[i][0], want[i][1])
		}
		if strings.Contains(s.label, "s3cr3t") || strings.Contains(s.label, "p@ss") || strings.Contains(s.label, "c1u5ter") {
			t.Errorf("node %d: label %q shows the password", i, s.label)
		}
	}
}

func TestParseNodesSentinelAuthAndTLS(t *testing.T) {
	specs, err := parseNodes("rediss-sentinel://:master-pw@s:1/m?sentinel_username=watch&sentinel_password=s3nt%26nel&skip_verify=true," +
		"redis-sentinel://s:2/m,rediss-cluster://c:1")
	if err != nil {
		t.Fatal(err)
	}
	s := specs[0]
	if s.password != "master-pw" || s.sentinelUser != "watch" || s.sentinelPass != "s3nt&nel" || s.tls == nil || !s.tls.InsecureSkipVerify {
		t.Errorf("spec %+v, tls %+v: want the master's and the sentinels' credentials apart, TLS without verification", s, s.tls)
	}
	if specs[1].tls != nil || specs[1].sentinelPass != "" {
		t.Errorf("plain sentinel URL: tls %v, sentinel password %q", specs[1].tls, specs[1].sentinelPass)
	}
	if c := specs[2]; c.tls == nil || c.tls.InsecureSkipVerify {
		t.Errorf("rediss-cluster: tls %+v, want TLS that verifies certificates", c.tls)
	}
	rc := s.open(time.Second)
	defer rc.Close()
	if o := rc.(*redis.Client).Options(); o.TLSConfig == nil || o.Password != "master-pw" {
		t.Errorf("the failover client's master options: TLS %v, password %q", o.TLSConfig, o.Password)
	}
	sc := s.sentinelClient(0, time.Second)
	defer sc.Close()
}

func TestParseNodesErrors(t *testing.T) {
	const secret = "Hunter2Hunter2"
	tests := []struct{ list, want string }{
		{"10.0.0.1:6379", "not a URL: write redis://10.0.0.1:6379"},
		{"redis://a:1,,redis://b:2", "empty node"},
		{"http://a:1", `unknown scheme "http"`},
		{"redis://:" + secret + "@a:99999", "bad port"},
		{"redis://:" + secret + "@a:1/x", "invalid database number"},
		{"redis://:" + secret + "@a:1?bogus=1", "unexpected option"},
		{"redis://:" + secret + "@a b:1", "percent-encode"},
		{"redis://:" + secret + "@", "no host"},
		{"redis-sentinel://:" + secret + "@s:1", "master's name"},
		{"redis-sentinel://:" + secret + "@s:1/m?x=y", "not supported"},
		{"redis-cluster://:" + secret + "@c:1/path", "no path"},
		{"redis-cluster://:" + secret + "@c:1,,d:2", "empty node"},
		{"redis-cluster://:" + secret + "@,c:1", "empty host"},
		{"redis-cluster://:" + secret + "@c:x", "bad port"},
		{"redis-cluster://c:1?sentinel_password=" + secret, "option sentinel_password is not supported in redis-cluster URLs"},
		{"redis-sentinel://s:1/m?skip_verify=true&sentinel_password=" + secret, "option skip_verify is not supported in redis-sentinel URLs (supported: sentinel_username, sentinel_password, skip_verify, tls_ca, tls_cert, tls_key (with TLS))"},
		{"rediss-sentinel://s:1/m?skip_verify=maybe&sentinel_password=" + secret, "skip_verify: want true or false"},
		{"rediss-sentinel://s:1/m?sentinel_password=a&sentinel_password=" + secret, "given 2 times"},
		{"redis-sentinel://s:1/?sentinel_password=" + secret, "master's name"},
	}
	for _, tt := range tests {
		_, err := parseNodes(tt.list)
		if err == nil {
			t.Errorf("parseNodes(%q): no error", tt.list)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseNodes(%q) = %q, want it to mention %q", tt.list, err, tt.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("parseNodes(%q) = %q: shows the password", tt.list, err)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://a:1", "redis://a:1"},
		{"redis://user@a:1", "redis://user@a:1"},
		{"redis://:pw@a:1", "redis://:xxxxx@a:1"},
		{"redis://u:p/w@x@a:1/2", "redis://u:xxxxx@a:1/2"},
		{"u:pw@a:1", "u:xxxxx@a:1"},
		{"redis-sentinel://s:1/m?sentinel_password=pw&x=1", "redis-sentinel://s:1/m?sentinel_password=xxxxx&x=1"},
		{"redis-sentinel://:a@s:1/m?sentinel_password=pw", "redis-sentinel://:xxxxx@s:1/m?sentinel_password=xxxxx"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPasswordFallback(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envPassword, "fromenv")
	t.Setenv(envNodes, "redis://a:1,redis://:fromurl@b:2")

	nf := nodeFlags{timeout: 1}
	specs, secrets, err := nf.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if specs[0].password != "fromenv" || specs[1].password != "fromurl" || specs[0].opts.Password != "fromenv" {
		t.Errorf("passwords %q %q, want fromenv fromurl", specs[0].password, specs[1].password)
	}
	if !slices.Contains(secrets, "fromenv") || !slices.Contains(secrets, "fromurl") {
		t.Errorf("secrets %q miss a password", secrets)
	}

	nf.passwordFile = file
	if specs, _, err = nf.resolve(); err != nil || specs[0].password != "fromfile" {
		t.Errorf("with --password-file: %q, %v; want fromfile", specs[0].password, err)
	}
	empty := filepath.Join(dir, "empty")
	_ = os.WriteFile(empty, nil, 0o600)
	for _, f := range []string{empty, filepath.Join(dir, "missing")} {
		nf.passwordFile = f
		if _, _, err := nf.resolve(); err == nil {
			t.Errorf("--password-file %s: no error", f)
		}
	}
}

// FuzzParseNodes checks that parsing never panics and that no error shows
// a URL's password.
func FuzzParseNodes(f *testing.F) {
	for _, s := range []string{
		"redis://:pw@a:1", "redis-sentinel://u:pw@a:1,b:2/m", "redis-cluster://:pw@a:1,b",
		"rediss://u:p%zzw@h:1", "redis://:pw@a:1?db=x", "x", "redis://:p:w@@a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		_, err := parseNodes(list)
		if err == nil {
			return
		}
		for piece := range strings.SplitSeq(list, ",") {
			u, perr := url.Parse(piece)
			if perr != nil || u.User == nil {
				continue
			}
			if pw, ok := u.User.Password(); ok && len(pw) >= 6 && strings.Contains(err.Error(), pw) {
				t.Errorf("parseNodes(%q) = %q: shows the password %q", list, err, pw)
			}
		}
	})
}
