// Package reply decodes the plain replies of a driver.Node (nil, int64,
// string, []any) into the types the engine expects, and recognizes error
// replies by their prefix.
package reply

import (
	"errors"
	"strings"

	"github.com/redlock-go/redlock/driver"
)

// HasPrefix reports whether err is an error reply (driver.IsReply) that
// starts with prefix (NOSCRIPT, or a script's REDLOCK_KIND).
func HasPrefix(err error, prefix string) bool {
	return driver.IsReply(err) && strings.HasPrefix(err.Error(), prefix)
}

// ErrUnexpected wraps a reply of a type or value the engine did not expect.
var ErrUnexpected = errors.New("unexpected reply")

// Int64 is a reply that must be an integer.
func Int64(v any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, unexpected(v)
	}
	return n, nil
}

// Slice is a reply that must be an array.
func Slice(v any, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	s, ok := v.([]any)
	if !ok {
		return nil, unexpected(v)
	}
	return s, nil
}

// String is a reply that must be a string.
func String(v any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", unexpected(v)
	}
	return s, nil
}

func unexpected(v any) error {
	return &unexpectedError{v}
}

type unexpectedError struct{ v any }

func (e *unexpectedError) Error() string {
	return "redlock: " + ErrUnexpected.Error() + ": " + describe(e.v)
}

func (e *unexpectedError) Unwrap() error { return ErrUnexpected }

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case string:
		if len(v) > 64 {
			v = v[:64] + "…"
		}
		return "string " + v
	case int64:
		return "integer"
	case []any:
		return "array"
	}
	return "value of another type"
}
