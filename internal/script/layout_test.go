package script

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	layout "github.com/redlock-go/redlock/internal/keys"
)

// The scripts that read or write a lock's hash (the lock family's and the
// semaphore's): they spell its fields as literals, which must be those of
// internal/keys, where the library and the command line tool read them.
var hashScripts = []string{
	"acquire.lua", "family.lua", "familyrefresh.lua", "familyrelease.lua",
	"holds.lua", "permit.lua", "permitrefresh.lua", "permitrelease.lua",
	"resume.lua", "seal.lua",
}

var (
	// hcall is a hash command on a line: its name and its arguments
	// after the key.
	hcall = regexp.MustCompile(`redis\.call\('(HSET|HGET|HMGET|HDEL|HEXISTS)',\s*[^,()]+(?:\[\d\])?,\s*(.*)\)`)
	// curField is a field of the hash as holds.lua returns it (a table).
	curField = regexp.MustCompile(`\bcur\.([a-z_]+)`)
	// prefixed is a literal ending in ':' that a field name is joined to
	// ('h:' .. id), or compared with (string.sub(f, 1, 2) == 'h:'); a
	// key's suffix (KEYS[1] .. ':claimed:' ..) starts with ':'.
	prefixed = regexp.MustCompile(`'([a-z]+:)'\s*\.\.|==\s*'([a-z]+:)'`)
	// modeValue is a value of the mode field compared or written.
	modeValue = regexp.MustCompile(`mode\s*[~=]=\s*'([^']*)'|'HSET',[^)]*'mode',\s*'([^']*)'|cur\[1\]\s*==\s*'([^']*)'`)
)

// TestLuaFields scans the scripts for the names of the lock hash's fields
// and checks them against internal/keys: every literal field name, prefix
// and mode is one of keys', and each of keys' is used by some script (so
// that renaming one side alone fails here).
func TestLuaFields(t *testing.T) {
	fields := map[string]bool{layout.FieldMode: false, layout.FieldPermits: false, layout.FieldOwner: false, layout.FieldToken: false}
	prefixes := map[string]bool{layout.HoldPrefix: false}
	modes := map[string]bool{string(rune(layout.ModeWrite)): false, string(rune(layout.ModeRead)): false, string(rune(layout.ModePermit)): false}
	use := func(set map[string]bool, what, v, where string) {
		if _, ok := set[v]; !ok {
			t.Errorf("%s: %s %q is not one of internal/keys' (%v)", where, what, v, slices.Sorted(mapKeys(set)))
			return
		}
		set[v] = true
	}
	for _, name := range hashScripts {
		src, err := os.ReadFile(filepath.Join(".", name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			where := name + ":" + strconv.Itoa(i+1)
			if c := strings.Index(line, "--"); c >= 0 && !strings.Contains(line[:c], "'") {
				line = line[:c]
			}
			for _, m := range hcall.FindAllStringSubmatch(line, -1) {
				args := splitArgs(m[2])
				step := 1
				if m[1] == "HSET" {
					step = 2 // field, value, field, value...
				}
				if m[1] == "HGET" || m[1] == "HEXISTS" {
					args = args[:1]
				}
				for j := 0; j < len(args); j += step {
					if lit, ok := literal(args[j]); ok {
						use(fields, "field", lit, where)
					}
				}
			}
			for _, m := range curField.FindAllStringSubmatch(line, -1) {
				if m[1] != "holds" { // holds.lua's count, not a field
					use(fields, "field", m[1], where)
				}
			}
			for _, m := range prefixed.FindAllStringSubmatch(line, -1) {
				use(prefixes, "field prefix", m[1]+m[2], where)
			}
			for _, m := range modeValue.FindAllStringSubmatch(line, -1) {
				use(modes, "mode", m[1]+m[2]+m[3], where)
			}
		}
	}
	for _, set := range []map[string]bool{fields, prefixes, modes} {
		for v, seen := range set {
			if !seen {
				t.Errorf("internal/keys' %q is in no script: the scan missed it, or the scripts spell it otherwise", v)
			}
		}
	}
}

// splitArgs splits a Lua argument list at its top-level commas.
func splitArgs(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			quoted = !quoted
		case quoted:
		case c == '(' || c == '{':
			depth++
		case c == ')' || c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// literal returns the string of a Lua argument that is one quoted literal.
func literal(arg string) (string, bool) {
	if len(arg) >= 2 && arg[0] == '\'' && arg[len(arg)-1] == '\'' && !strings.Contains(arg[1:len(arg)-1], "'") {
		return arg[1 : len(arg)-1], true
	}
	return "", false
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
