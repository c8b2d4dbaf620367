package kubernetes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// redisConfig is the configuration a redis-server command line gives, as
// redis-server (7.0 to 7.2, server.c's main) reads it: each --name starts
// a directive and the arguments after it are its values, an argument that
// holds spaces after its --name ("--replicaof host port") is a whole
// directive, and the directives are then read like a config file's lines,
// the last of a repeated one winning.
type redisConfig struct {
	lines [][]string // the directives in order, names in lower case
	// unread is what the test cannot see: a config file, standard input,
	// an include.
	unread string
	errs   []error // arguments redis-server refuses
}

// parseRedisArgs reads the arguments after redis-server.
func parseRedisArgs(args []string) redisConfig {
	var rc redisConfig
	j := 0
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		rc.unread = "the config file " + args[0]
		j = 1
	}
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			cur[0] = strings.ToLower(cur[0])
			rc.lines = append(rc.lines, cur)
		}
		cur = nil
	}
	handled := true // the last directive has at least one value
	for ; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "-" && (j == 0 || j == len(args)-1):
			rc.unread = "standard input (-)"
		case handled && strings.HasPrefix(a, "--"):
			flush()
			toks, err := splitRedisArgs(a[2:])
			whole, _ := splitRedisArgs(a)
			if err != nil {
				rc.errs = append(rc.errs, fmt.Errorf("argument %q: %v", a, err))
			}
			cur = toks
			handled = len(whole) > 1
			if !handled {
				var value []string
				value, handled = redisNoValue(a, args, j)
				cur = append(cur, value...)
			}
		default:
			cur = append(cur, a)
			handled = true
		}
	}
	flush()
	for _, l := range rc.lines {
		if len(l) > 0 && l[0] == "include" {
			rc.unread = "the included file " + strings.Join(l[1:], " ")
		}
	}
	rc.errs = append(rc.errs, rc.validate()...)
	return rc
}

// redisNoValue applies redis-server's two exceptions to "a --name takes
// the next argument as its value", for the argument j: --save followed by
// another --name, or last, is save "" (and --sentinel takes no value). It
// returns the values the directive gets, and whether it is complete.
func redisNoValue(a string, args []string, j int) ([]string, bool) {
	last := j == len(args)-1
	nextFlag := !last && strings.HasPrefix(args[j+1], "--")
	switch {
	case strings.EqualFold(a, "--save") && (nextFlag || last):
		return []string{""}, nextFlag
	case strings.EqualFold(a, "--sentinel"):
		return nil, nextFlag
	}
	return nil, false
}

// splitRedisArgs splits a line as redis-server's sdssplitargs does: on
// blanks, with "double quotes" (and their \ escapes) and 'single quotes'.
func splitRedisArgs(line string) ([]string, error) {
	var toks []string
	for i := 0; ; {
		for i < len(line) && isRedisSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return toks, nil
		}
		tok, n, err := redisToken(line[i:])
		if err != nil {
			return nil, err
		}
		toks = append(toks, tok)
		i += n
	}
}

// redisToken reads the token at the start of s: it returns the token and
// the number of bytes it took.
func redisToken(s string) (string, int, error) {
	var b strings.Builder
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == 0 && isRedisSpace(c):
			return b.String(), i, nil
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote != 0 && c == quote:
			if i+1 < len(s) && !isRedisSpace(s[i+1]) {
				return "", 0, errors.New("closing quote must be followed by a space")
			}
			quote = 0
		case quote == '"' && c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(unescape(s[i]))
		default:
			b.WriteByte(c)
		}
	}
	if quote != 0 {
		return "", 0, errors.New("unbalanced quotes")
	}
	return b.String(), len(s), nil
}

func isRedisSpace(c byte) bool { return strings.IndexByte(" \n\r\t\v\f", c) >= 0 }

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

// redisAliases are other names of the directives the test reads.
var redisAliases = map[string]string{"slaveof": "replicaof"}

// get is the value of the last directive name (or an alias of it), and
// whether there is one.
func (rc redisConfig) get(name string) ([]string, bool) {
	for i := len(rc.lines) - 1; i >= 0; i-- {
		l := rc.lines[i]
		if l[0] == name || redisAliases[l[0]] == name {
			return l[1:], true
		}
	}
	return nil, false
}

// value is the single value of a directive ("" when it is not given).
func (rc redisConfig) value(name string) string {
	v, _ := rc.get(name)
	if len(v) != 1 {
		return ""
	}
	return v[0]
}

// redisArity is the number of values of the directives the test reads;
// redis-server refuses another number.
var redisArity = map[string]int{
	"appendonly": 1, "appendfsync": 1, "maxmemory": 1, "maxmemory-policy": 1,
	"replicaof": 2, "requirepass": 1, "port": 1, "dir": 1,
}

// redisEnums are the values redis-server accepts for the directives the
// test reads that take a word.
var redisEnums = map[string][]string{
	"appendonly":       {"yes", "no"},
	"appendfsync":      {"always", "everysec", "no"},
	"maxmemory-policy": {"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"},
}

// validate returns the errors redis-server would stop at in the
// directives the test reads.
func (rc redisConfig) validate() []error {
	var errs []error
	for _, l := range rc.lines {
		name := l[0]
		if a, ok := redisAliases[name]; ok {
			name = a
		}
		n, ok := redisArity[name]
		switch {
		case !ok:
			continue
		case len(l)-1 != n:
			errs = append(errs, fmt.Errorf("%s %q: wrong number of arguments (want %d): redis-server would not start", l[0], l[1:], n))
			continue
		}
		if enum, ok := redisEnums[name]; ok && !containsFold(enum, l[1]) {
			errs = append(errs, fmt.Errorf("%s %q: redis-server accepts only %v", l[0], l[1], enum))
		}
		if name == "maxmemory" {
			if _, err := redisBytes(l[1]); err != nil {
				errs = append(errs, fmt.Errorf("maxmemory %q: %v", l[1], err))
			}
		}
	}
	return errs
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// redisBytes parses a memory size as redis-server does (memtoull): a
// number with an optional unit, k, m and g in powers of 1000, kb, mb and
// gb in powers of 1024, in any case.
func redisBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}}
	lower, mul := strings.ToLower(s), int64(1)
	for _, u := range units {
		if num, ok := strings.CutSuffix(lower, u.suffix); ok {
			lower, mul = num, u.mul
			break
		}
	}
	n, err := strconv.ParseInt(lower, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a memory size")
	}
	return n * mul, nil
}
