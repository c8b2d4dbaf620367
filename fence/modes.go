package fence

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// SignatureHeader is the request header that carries a sequencer's
// signature (Sign) for a Guard's Middleware in the Signed mode.
const SignatureHeader = "Fencing-Signature"

// Checked makes a Guard admit a sequencer only when c, the lock's nodes
// (redlock's *Client), says it is Current, in Do and so in Middleware.
func Checked(c Checker) Option {
	return optionFunc(func(o *options) { o.checker = c })
}

// Signed makes a Guard's Middleware admit a request only when its
// Fencing-Signature header is the signature of its Fencing-Token header's
// sequencer under key (Sign).
func Signed(key []byte) Option {
	k := append([]byte(nil), key...)
	return optionFunc(func(o *options) { o.key = k })
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
