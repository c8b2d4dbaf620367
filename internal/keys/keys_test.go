package keys

import (
	"errors"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	l := Layout{Prefix: "app:"}
	k, err := l.Lock("order:42")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ got, want string }{
		{k, "{app:order:42}"},
		{Fence(k), "{app:order:42}:fence"},
		{Channel(k), "{app:order:42}:released"},
		{l.Epoch(k, false), "{app:}:epoch"},
		{l.NodeEpoch(), "{app:}:epoch"},
		{l.Epoch(k, true), "{app:order:42}:epoch"},
		{ClusterEpoch(k), "{app:order:42}:epoch"},
		{WriterWaits(k), "{app:order:42}:wwait"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestLockRefuses(t *testing.T) {
	if _, err := (Layout{Prefix: "p"}).Lock(""); !errors.Is(err, ErrEmptyName) {
		t.Errorf("empty name: %v", err)
	}
	for _, l := range []struct{ prefix, name string }{{"", "}x"}, {"}", "x"}} {
		if _, err := (Layout{Prefix: l.prefix}).Lock(l.name); err == nil || !strings.Contains(err.Error(), "starts with '}'") {
			t.Errorf("prefix %q name %q: %v", l.prefix, l.name, err)
		}
	}
	if k, err := (Layout{}).Lock("a}b"); err != nil || k != "{a}b}" {
		t.Errorf("a '}' after the first byte is allowed: %q, %v", k, err)
	}
}

// The prefix is joined to the name with no separator, as WithPrefix and
// docs/safety.md say: prefixes that begin with one another share keys.
// The layout is fixed (Clients of different versions must lock the same
// keys); this test fails if it changes.
func TestPrefixJoinedWithoutSeparator(t *testing.T) {
	for _, c := range []struct{ p1, n1, p2, n2, key string }{
		{"a", "bc", "ab", "c", "{abc}"},
		{"app:", "jobs:x", "app:jobs:", "x", "{app:jobs:x}"},
	} {
		k1, err1 := Layout{Prefix: c.p1}.Lock(c.n1)
		k2, err2 := Layout{Prefix: c.p2}.Lock(c.n2)
		if err1 != nil || err2 != nil || k1 != c.key || k2 != c.key {
			t.Errorf("prefix %q name %q: %q, %v; prefix %q name %q: %q, %v; want both %q", c.p1, c.n1, k1, err1, c.p2, c.n2, k2, err2, c.key)
		}
	}
}

// Name reads back the name Lock put in a key, whatever the prefix and the
// name hold (braces, colons).
func TestNameIsLocksInverse(t *testing.T) {
	for _, prefix := range []string{"", "redlock:", "{app}:", "a}b"} {
		for _, name := range []string{"x", "{y}", "a:b:c", "}z{", "naïve"} {
			l := Layout{Prefix: prefix}
			key, err := l.Lock(name)
			if err != nil {
				continue // a tag that starts with '}' is refused
			}
			if got := l.Name(key); got != name {
				t.Errorf("prefix %q: Name(Lock(%q)) = %q", prefix, name, got)
			}
		}
	}
}
