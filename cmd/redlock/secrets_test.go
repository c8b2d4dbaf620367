package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
			tc{how.name + "/doctor", how.env, append([]string{"doctor", "--json"}, how.flags...), exitOK},
		)
	}
	tests = append(tests,
		tc{"wrong password/run", nil, append([]string{"run", noGuard, wait, "--nodes", withPassword(wrong)}, child...), exitUnavailable},
		tc{"wrong password/inspect", nil, []string{"inspect", "--nodes", withPassword(wrong), "x"}, exitUnavailable},
		tc{"wrong password/doctor", nil, []string{"doctor", "--nodes", withPassword(wrong)}, exitError},
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
			if strings.HasPrefix(tt.name, "wrong") && !strings.Contains(r.stdout+r.stderr, "WRONGPASS") {
				t.Errorf("does not say the password is wrong:\n%v", r)
			}
			if tt.args[0] == "run" && tt.code == exitOK {
				if !strings.Contains(r.stdout, "REDLOCK_HELD=1") || strings.Contains(r.stdout, envNodes+"=") || strings.Contains(r.stdout, envPassword+"=") {
					t.Errorf("child environment:\n%s", r.stdout)
				}
			}
		})
	}
}

func TestScrubWriter(t *testing.T) {
	var b strings.Builder
	out := newOutputs(&b, &b)
	w, _ := out.own([]string{"hunter22", "pw"})
	_, _ = w.Write([]byte("auth hunter22 failed; pw stays\n"))
	if got := b.String(); got != "auth xxxxx failed; pw stays\n" {
		t.Errorf("scrubbed %q", got)
	}
}
