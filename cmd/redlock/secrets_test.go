package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestPasswordsNeverShown runs every command against password-protected
// nodes, with the password given each way, right and wrong, and checks that
// it appears in no output and not in a child's environment.
func TestPasswordsNeverShown(t *testing.T) {
	const (
		password = "Sup3r-S3cret-pw"
		wrong    = "Wr0ng-Passw0rd-x"
	)
	// redistest checks readiness without a password: set it afterwards.
	servers := redistest.Start(t, 3)
	settle(t, servers...)
	for _, s := range servers {
		rc := s.Client()
		err := rc.ConfigSet(context.Background(), "requirepass", password).Err()
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	withPassword := func(pw string) string {
		urls := make([]string, len(servers))
		for i, s := range servers {
			urls[i] = "redis://:" + url.QueryEscape(pw) + "@" + s.Addr()
		}
		return strings.Join(urls, ",")
	}
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The child prints its whole environment.
	child := []string{"pw-job", "--", "env"}

	type tc struct {
		name string
		env  map[string]string
		args []string
		code int
	}
	var tests []tc
	for _, how := range []struct {
		name  string
		env   map[string]string
		flags []string
	}{
		{"url", nil, []string{"--nodes", withPassword(password)}},
		{"REDLOCK_NODES", map[string]string{envNodes: withPassword(password)}, nil},
		{"REDLOCK_PASSWORD", map[string]string{envPassword: password}, []string{"--nodes", nodesFlag(servers...)}},
		{"password file", nil, []string{"--password-file", file, "--nodes", nodesFlag(servers...)}},
	} {
		tests = append(tests,
			tc{how.name + "/run", how.env, append(append([]string{"run", noGuard, wait}, how.flags...), child...), exitOK},
			tc{how.name + "/inspect", how.env, append(append([]string{"inspect"}, how.flags...), "pw-job"), exitOK},
			tc{how.name + "/doctor", how.env, append([]string{"doctor", "--json", agedMaxTTL}, how.flags...), exitOK},
		)
	}
	tests = append(tests,
		tc{"wrong password/run", nil, append([]string{"run", noGuard, wait, "--nodes", withPassword(wrong)}, child...), exitAuth},
		tc{"wrong password/inspect", nil, []string{"inspect", "--nodes", withPassword(wrong), "x"}, exitAuth},
		tc{"wrong password/doctor", nil, []string{"doctor", "--nodes", withPassword(wrong)}, exitAuth},
		tc{"wrong password/bench", nil, []string{"bench", "--nodes", withPassword(wrong)}, exitAuth},
		tc{"missing password/run", nil, append([]string{"run", noGuard, wait, "--nodes", nodesFlag(servers...)}, child...), exitAuth},
		tc{"missing password/inspect", nil, []string{"inspect", "--nodes", nodesFlag(servers...), "x"}, exitAuth},
		tc{"missing password/doctor", nil, []string{"doctor", "--nodes", nodesFlag(servers...)}, exitAuth},
		tc{"bad url", nil, []string{"inspect", "--nodes", "redis://:" + password + "@127.0.0.1:notaport", "x"}, exitUsage},
		tc{"bad sentinel url", nil, []string{"doctor", "--nodes", "redis-sentinel://:" + password + "@h:1"}, exitUsage},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envNodes, "")
			t.Setenv(envPassword, "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			r := runCLI(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d: %v", r.code, tt.code, r)
			}
			for _, pw := range []string{password, wrong, url.QueryEscape(password)} {
				if strings.Contains(r.stdout+r.stderr, pw) {
					t.Errorf("output shows a password:\n%v", r)
				}
			}
			if strings.HasPrefix(tt.name, "wrong") && !strings.Contains(r.stdout+r.stderr, "authentication failed: WRONGPASS") {
				t.Errorf("does not say the password is wrong:\n%v", r)
			}
			if strings.HasPrefix(tt.name, "missing") && !strings.Contains(r.stdout+r.stderr, "authentication failed: NOAUTH") {
				t.Errorf("does not say a password is needed:\n%v", r)
			}
			if strings.Contains(r.stdout+r.stderr, "unreachable") {
				t.Errorf("calls the nodes unreachable:\n%v", r)
			}
			if tt.args[0] == "run" && tt.code == exitOK {
				if !strings.Contains(r.stdout, "REDLOCK_HELD=1") || strings.Contains(r.stdout, envNodes+"=") || strings.Contains(r.stdout, envPassword+"=") {
					t.Errorf("child environment:\n%s", r.stdout)
				}
			}
		})
	}
}

// TestPasswordNotRevealedByScrubbing gives passwords that are also words
// and numbers of the output: a password "redis", and one that is a node's
// port. The output is unchanged by them (nothing is scrubbed by searching
// the text, which would show the password by what vanished), and no
// output shows a password where it was given.
func TestPasswordNotRevealedByScrubbing(t *testing.T) {
	servers := redistest.Start(t, 2)
	settle(t, servers...)
	port := strconv.Itoa(servers[0].Port())
	for _, pw := range []string{"redis", port} {
		t.Run(pw, func(t *testing.T) {
			for _, s := range servers {
				rc := s.Client()
				err := rc.ConfigSet(context.Background(), "requirepass", pw).Err()
				_ = rc.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			defer func() {
				for _, s := range servers {
					rc := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: pw})
					_ = rc.ConfigSet(context.Background(), "requirepass", "").Err()
					_ = rc.Close()
				}
			}()
			t.Setenv(envNodes, "")
			t.Setenv(envPassword, pw)
			r := runCLI(t, "doctor", agedMaxTTL, "--nodes", nodesFlag(servers...))
			if r.code != exitOK || strings.Contains(r.stdout+r.stderr, "xxxxx") {
				t.Errorf("doctor changed its output for the password:\n%v", r)
			}
			for _, want := range []string{"every node is a different redis-server process", "0 127.0.0.1:" + port + " "} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("doctor's output lacks %q:\n%v", want, r)
				}
			}
			// A URL in a message has its password field replaced, and only
			// that field.
			r = runCLI(t, "inspect", "--nodes", "redis://:"+pw+"@127.0.0.1:"+port+"/notadb", "x")
			if want := `node "redis://:xxxxx@127.0.0.1:` + port + `/notadb"`; r.code != exitUsage || !strings.Contains(r.stderr, want) {
				t.Errorf("bad URL: want %s: %v", want, r)
			}
		})
	}
}
