package fence

import (
	"fmt"
	"strconv"
	"strings"
)

// Sequencer is a fencing token bound to the lock that issued it: the lock's
// name, its kind and the token, as Chubby's sequencer carries a lock's
// name, mode and generation. redlock's Lock.Sequencer returns one.
//
// A resource fenced with sequencers records which lock it follows (the
// Lock of the first sequencer it admits) beside its highest token, and
// refuses a sequencer of another lock (ErrOtherLock): a newer token of
// another lock would otherwise pass, and raise the fence above every token
// of the right lock for as long as that lock's counters take to catch up.
// The name is compared, not the kind: the reader and the writer of one
// read-write lock follow one lock.
//
// A bare token, a number from elsewhere, is Token(n): Lock and Kind are
// empty. A resource that follows a lock refuses it too; one that does not
// compares it as a number, as a sequencer of any lock.
//
// The zero Sequencer is refused by every fence with ErrInvalid: token 0 is
// what a lock of several names (redlock's Client.All) has as its own, and
// each of its Parts has a sequencer of its own.
type Sequencer struct {
	Lock  string // the lock's name; "" for a bare token
	Kind  string // the lock's kind as redlock names it ("plain", "reentrant", "write", "read", "permit"); "" for a bare token
	Token int64  // the fencing token
}

// Token returns the sequencer of a bare token n, which names no lock: for
// tokens that come from elsewhere than a redlock Lock.
func Token(n int64) Sequencer { return Sequencer{Token: n} }

// String returns the sequencer's text form, which ParseSequencer reads
// back: KIND:TOKEN:NAME, such as plain:1838866269518849:orders, or the
// token alone for a bare token. The name comes last, with every byte
// below '!' or above '~', and '%', written as %XX, so that the text is
// one line of printable ASCII that fits an HTTP header. One sequencer has
// one text form.
func (s Sequencer) String() string {
	t := strconv.FormatInt(s.Token, 10)
	if s.Lock == "" && s.Kind == "" {
		return t
	}
	return s.Kind + ":" + t + ":" + escapeName(s.Lock)
}

// ParseSequencer reads a sequencer's text form (String): KIND:TOKEN:NAME,
// or a bare token. It returns an error matching ErrInvalid for any other
// text: a kind that is not lowercase letters, a token that is not a
// decimal int64, an empty or badly escaped name, or a text that is not the
// one String writes for what it says.
func ParseSequencer(text string) (Sequencer, error) {
	kind, rest, bound := strings.Cut(text, ":")
	if !bound {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != text {
			return Sequencer{}, invalid("sequencer %q: neither KIND:TOKEN:NAME nor a decimal token", text)
		}
		return Token(n), nil
	}
	tok, name, ok := strings.Cut(rest, ":")
	if !ok || !isKind(kind) {
		return Sequencer{}, invalid("sequencer %q: not KIND:TOKEN:NAME with a kind of lowercase letters", text)
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return Sequencer{}, invalid("sequencer %q: token %q is not a decimal int64", text, tok)
	}
	lock, err := unescapeName(name)
	if err != nil || lock == "" {
		return Sequencer{}, invalid("sequencer %q: the lock's name %q is empty or badly escaped", text, name)
	}
	s := Sequencer{Lock: lock, Kind: kind, Token: n}
	if s.String() != text {
		return Sequencer{}, invalid("sequencer %q: not in its one text form %q", text, s.String())
	}
	return s, nil
}

// isKind reports whether k is a kind as a sequencer's text carries it: one
// or more lowercase ASCII letters.
func isKind(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 'a' || k[i] > 'z' {
			return false
		}
	}
	return true
}

// escapeName writes every byte of name below '!' or above '~', and '%',
// as %XX (uppercase hex).
func escapeName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c > '~' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// unescapeName is escapeName's inverse; it refuses a '%' not followed by
// two hex digits.
func unescapeName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape")
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", err
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}
