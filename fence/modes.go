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
// (redlock's *Client, Client.Check), says it is Current, in Do and so in
// Middleware: a forged token, which no holder has, is Superseded and
// raises no fence (409); a bare token, which names no lock to ask about,
// is refused (ErrInvalid, 400); when the nodes cannot say (Unknown), the
// request is refused too (503). It trusts a quorum of the lock's nodes and
// the Client's configuration (its nodes and prefix must be the holders').
// The check is made while the guard holds the resource, right before the
// admission, and costs a round trip to the nodes per request. The fence
// is kept as in the plain mode, so that holders that passed a check are
// ordered by their tokens. A nil c makes every Do fail with ErrInvalid.
func Checked(c Checker) Option {
	return optionFunc(func(o *options) { o.checker, o.checkerSet = c, true })
}

// Signed makes a Guard's Middleware admit a request only when its
// Fencing-Signature header is the signature of its Fencing-Token header's
// sequencer under key (Sign), a secret of at least 16 bytes that the lock's
// holders and the guard share: a request without it is answered 428, one
// with a wrong one 403, and neither raises a fence. It trusts every holder
// of the key to sign only the sequencers of its own locks, and the key to
// stay secret; it needs no round trip. A signed sequencer replayed by
// someone who saw it is a real holder's, which raises the fence to no
// more than that holder's token (authenticate writers as any service
// does: this mode protects the fence, not the write). Do takes no
// signature: Signed is the Middleware's.
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
