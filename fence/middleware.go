package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
)

// TokenHeader is the request header Middleware reads the sequencer from:
// its text form (Sequencer.String), or a bare token.
const TokenHeader = "Fencing-Token"

// defaultMaxBody is the most bytes of a request body Middleware reads
// unless MaxBody says otherwise: 10 MiB, as net/http's ParseForm.
const defaultMaxBody = 10 << 20

// MaxBody sets the most bytes of a request body that a Guard's Middleware
// reads before it takes the guard: a longer body is answered 413 Request
// Entity Too Large and admits nothing. The default is 10 MiB; 0 refuses
// every body. Redis and Table ignore it. A negative n makes the
// Middleware answer every request 500, saying so.
func MaxBody(n int64) Option {
	return optionFunc(func(o *options) { o.maxBody, o.maxBodySet = n, true })
}

// Middleware runs next under Do for the resource that resource names for
// the request and the sequencer of its Fencing-Token header: its text form
// (Sequencer.String, such as plain:1838866269518849:orders) or a bare
// token. In the Signed mode the request must also carry the sequencer's
// signature under the guard's key (Sign) in its Fencing-Signature header.
//
// It reads the request's body whole first, up to MaxBody, before it takes
// the guard, and gives next the body from memory: a client that stalls
// mid-upload holds only its own request, never the resource, and a newer
// holder's request runs meanwhile (a stalled holder is what fencing is
// for). Once the body is read, the token is admitted and next runs while
// no other request of the resource runs, as in Do: the stalled holder's
// write then comes after the newer one's, and is refused. A service whose
// bodies do not fit in memory calls Do itself, after staging the body
// (a temporary file renamed under Do).
//
// It answers without calling next: 428 Precondition Required without the
// header (or, Signed, without the signature), 403 Forbidden for a wrong
// signature, 400 Bad Request for a malformed sequencer, token 0, an empty
// resource, a bare token in the Checked mode or a body that could not be
// read, 413 Request Entity Too Large for a body over MaxBody, 409 Conflict
// for a stale token (the body says both tokens), a superseded sequencer
// (Checked) or another lock's, 503 Service Unavailable when the store
// fails or the lock's nodes cannot say (Checked), each with the error as a
// plain-text body. With a nil resource or next, a guard without a store,
// a nil Checker, a negative MaxBody or a Signed key shorter than 16 bytes,
// it answers every request 500 Internal Server Error, saying which.
//
// resource must give one name to every spelling of one resource, the name
// under which next stores it: CleanPath does for a resource named by its
// URL path.
func (g *Guard) Middleware(resource func(*http.Request) string, next http.Handler) http.Handler {
	if err := g.middlewareReady(resource, next); err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, code, err := requestToken(r)
		if err == nil && g.opts.key != nil {
			code, err = signature(g.opts.key, token, r)
		}
		if err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		if code, err := g.readBody(w, r); err != nil {
			if r.Context().Err() == nil {
				http.Error(w, err.Error(), code)
			}
			return
		}
		ran := false
		err = g.Do(r.Context(), resource(r), token, func(context.Context) error {
			ran = true
			next.ServeHTTP(w, r)
			return nil
		})
		switch {
		case ran || err == nil:
		case errors.Is(err, ErrStale), errors.Is(err, ErrOtherLock):
			http.Error(w, err.Error(), http.StatusConflict)
		case errors.Is(err, ErrInvalid):
			http.Error(w, err.Error(), http.StatusBadRequest)
		case r.Context().Err() != nil:
			// The client is gone: nobody reads the answer.
		default:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
}

// middlewareReady refuses a middleware that cannot serve: a guard that is
// not ready, no resource function, no next handler, a negative MaxBody.
func (g *Guard) middlewareReady(resource func(*http.Request) string, next http.Handler) error {
	if err := g.ready(); err != nil {
		return err
	}
	switch {
	case resource == nil:
		return invalid("nil resource function")
	case isNil(next):
		return invalid("nil next handler")
	case g.opts.maxBody < 0:
		return invalid("MaxBody(%d): a negative limit", g.opts.maxBody)
	case g.opts.key != nil && len(g.opts.key) < minKey:
		return invalid("Signed: a key of %d bytes, fewer than %d", len(g.opts.key), minKey)
	}
	return nil
}

// requestToken reads the sequencer of r's Fencing-Token header (its text
// form, or a bare token), or says which status answers r and why.
func requestToken(r *http.Request) (Sequencer, int, error) {
	raw := r.Header.Get(TokenHeader)
	if raw == "" {
		return Sequencer{}, http.StatusPreconditionRequired, fmt.Errorf("fence: missing %s header", TokenHeader)
	}
	s, err := ParseSequencer(raw)
	if err != nil {
		return Sequencer{}, http.StatusBadRequest, fmt.Errorf("fence: malformed %s header %q", TokenHeader, raw)
	}
	return s, 0, nil
}

// readBody reads r's body whole, up to the guard's MaxBody, and puts it
// back in r from memory; or says which status answers r and why.
func (g *Guard) readBody(w http.ResponseWriter, r *http.Request) (int, error) {
	limit := int64(defaultMaxBody)
	if g.opts.maxBodySet {
		limit = g.opts.maxBody
	}
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= limit {
		buf.Grow(int(n))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	var tooLong *http.MaxBytesError
	switch {
	case errors.As(err, &tooLong):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("fence: request body over %d bytes", limit)
	case err != nil:
		return http.StatusBadRequest, fmt.Errorf("fence: reading the request body: %w", err)
	}
	r.Body = io.NopCloser(&buf)
	return 0, nil
}

// CleanPath is the resource of a request named by its URL path, for
// Middleware: the decoded path (r.URL.Path) made rooted and cleaned as by
// path.Clean, so that /reports//q3, /reports/./q3, /reports/q3/,
// /reports/x/../q3 and /reports/%71%33 are all /reports/q3, one resource
// with one fence. A handler that finds its file by the raw path instead
// would give a stale token a way around the fence through another
// spelling. CleanPath knows nothing of the store behind the handler: on a
// case-insensitive file system, or one that normalizes Unicode, fold the
// name as the store does.
func CleanPath(r *http.Request) string {
	return path.Clean("/" + r.URL.Path)
}
