package fence

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
)

// SignatureHeader is the request header that carries a sequencer's
// signature (Sign) for a Guard's Middleware in the Signed mode.
const SignatureHeader = "Fencing-Signature"

// Checked makes a Guard admit a sequencer only when c, the lock's nodes
// (redlock's *Client), says it is Current, in Do and so in Middleware.
func Checked(c Checker) Option {
	return optionFunc(func(o *options) { o.checker, o.checkerSet = c, true })
}

// Signed makes a Guard's Middleware admit a request only when its
// Fencing-Signature header is the signature of its Fencing-Token header's
// sequencer under key (Sign).
func Signed(key []byte) Option {
	k := append([]byte{}, key...)
	return optionFunc(func(o *options) { o.key = k })
}

// minKey is the shortest key Signed takes: 128 bits.
const minKey = 16

// signature checks r's Fencing-Signature header against s's signature
// under key, or says which status answers r and why.
func signature(key []byte, s Sequencer, r *http.Request) (int, error) {
	got := r.Header.Get(SignatureHeader)
	if got == "" {
		return http.StatusPreconditionRequired, fmt.Errorf("fence: missing %s header: this guard admits only sequencers signed with the lock holders' key", SignatureHeader)
	}
	if !hmac.Equal([]byte(got), []byte(Sign(key, s))) {
		return http.StatusForbidden, fmt.Errorf("fence: the %s header is not the signature of %s under the lock holders' key", SignatureHeader, s)
	}
	return 0, nil
}

// Sign returns the signature of s under key, which a holder sends in the
// Fencing-Signature header beside s's text form in Fencing-Token, for a
// Guard in the Signed mode: an HMAC-SHA-256 of s's text form, in
// unpadded base64url.
func Sign(key []byte, s Sequencer) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("redlock fence sequencer\n" + s.String()))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
