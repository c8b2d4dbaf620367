package driver

import (
	"fmt"
	"strconv"
)

// Arg returns v, an argument of Do or Pipe, as the string Redis receives:
// for a driver whose client library takes a command as strings (rueidis),
// or that must read a key or a script's numkeys out of args to route a
// command (go-redis on a Cluster). Integers, floats and booleans are
// written as go-redis writes them (a bool as 1 or 0, a float in plain
// decimal), so that every driver sends the same bytes; any other type as
// fmt.Sprint formats it. A string is returned as it is, and an int below
// 100 without allocating (strconv's small numbers).
func Arg(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		if v {
			return "1"
		}
		return "0"
	}
	return fmt.Sprint(v)
}
