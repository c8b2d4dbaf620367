package redlock

import (
	"errors"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/script"
)

// Tests of the quorum errors' per-node reasons (quorums.go).

// A script's identity refusal (REDLOCK_NODE) is said in words in a
// QuorumError's node reason, with the reply kept in its chain.
func TestOtherNodeError(t *testing.T) {
	for _, tc := range []struct{ reply, want string }{
		{"REDLOCK_NODE 0123456789abcdef script: x, on @user_function:70.", "a server of node identity 0123456789abcdef, not the node identified"},
		{"REDLOCK_NODE - script: x", "a server with no node identity (it lost its data), not the node identified"},
	} {
		err := otherNodeError(driver.ReplyError(tc.reply))
		if !strings.Contains(err.Error(), tc.want) || !driver.IsReply(err) || !script.IsOtherNode(errors.Unwrap(err)) {
			t.Errorf("%q: %v", tc.reply, err)
		}
	}
	if err := driver.ReplyError("WRONGTYPE x"); otherNodeError(err) != err {
		t.Errorf("another reply changed: %v", otherNodeError(err))
	}
}
