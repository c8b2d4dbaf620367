package fence_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/redistest"
)

// request sends a PUT of body to url with the given headers (name,
// value, ...) and returns the status and the body of the answer.
func request(t *testing.T, url, body string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// forgedOnce plays finding 2 of issue 46 against a guard's middleware: a
// forged header with the largest token, then the real holder's request
// (its headers). The forged request must be refused, and the holder's
// admitted: a forged token must not raise the fence.
func forgedOnce(t *testing.T, g *fence.Guard, forged []string, holder []string) {
	t.Helper()
	srv := httptest.NewServer(g.Middleware(fence.CleanPath, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv.Close)
	code, _ := request(t, srv.URL+"/reports/q3", "forged", forged...)
	if code == http.StatusOK {
		t.Errorf("forged header %v: 200, want it refused", forged)
	}
	code, body := request(t, srv.URL+"/reports/q3", "real", holder...)
	if code != http.StatusOK {
		t.Errorf("the holder's request after a forged one: %d %q, want 200", code, body)
	}
}

// TestGuardForgedHeader is finding 2 of issue 46: one request with
// Fencing-Token: 9223372036854775807 got a 200, and every real holder a
// 409 after it, for good. In the guard's checked modes the forged header
// is refused and raises nothing: with Checked, the lock's nodes say the
// token is not the lock's current one; with Signed, it carries no
// signature under the holders' key (or a wrong one).
func TestGuardForgedHeader(t *testing.T) {
	max := "9223372036854775807"
	t.Run("checked", func(t *testing.T) {
		c, l := lockOnNodes(t, "reports")
		g := fence.NewGuard(&fence.MemoryStore{}, fence.Checked(c))
		forgedOnce(t, g, []string{fence.TokenHeader, "plain:" + max + ":reports"}, []string{fence.TokenHeader, l.Sequencer().String()})
	})
	t.Run("checked, bare token", func(t *testing.T) {
		c, l := lockOnNodes(t, "reports")
		g := fence.NewGuard(&fence.MemoryStore{}, fence.Checked(c))
		forgedOnce(t, g, []string{fence.TokenHeader, max}, []string{fence.TokenHeader, l.Sequencer().String()})
	})
	key := []byte("the holders' and the guard's key")
	holder := fence.Sequencer{Lock: "reports", Kind: "plain", Token: 10}
	signed := []string{fence.TokenHeader, holder.String(), fence.SignatureHeader, fence.Sign(key, holder)}
	forged := fence.Sequencer{Lock: "reports", Kind: "plain", Token: 1<<63 - 1}
	for name, hdr := range map[string][]string{
		"signed, no signature": {fence.TokenHeader, forged.String()},
		"signed, wrong key":    {fence.TokenHeader, forged.String(), fence.SignatureHeader, fence.Sign([]byte("a guess"), forged)},
		"signed, another's":    {fence.TokenHeader, forged.String(), fence.SignatureHeader, fence.Sign(key, holder)},
		"signed, bare, no sig": {fence.TokenHeader, max},
		"signed, garbage":      {fence.TokenHeader, forged.String(), fence.SignatureHeader, "!!"},
	} {
		t.Run(name, func(t *testing.T) {
			g := fence.NewGuard(&fence.MemoryStore{}, fence.Signed(key))
			forgedOnce(t, g, hdr, signed)
		})
	}
}

// lockOnNodes starts three nodes, obtains the lock name on them, and
// returns the Client (the guard's Checker) and the lock, both released and
// closed when the test ends.
func lockOnNodes(t *testing.T, name string) (*redlock.Client, *redlock.Lock) {
	t.Helper()
	return lockOnNodesB(t, name)
}

// lockOnNodesB is lockOnNodes for a test or a benchmark.
func lockOnNodesB(t testing.TB, name string) (*redlock.Client, *redlock.Lock) {
	t.Helper()
	var nodes []redis.UniversalClient
	for _, s := range redistest.Start(t, 3) {
		n := s.Client()
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff), redlock.WithConfigRecords(false),
		redlock.WithNodeTimeout(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l, err := c.Mutex(name).Obtain(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return c, l
}

// TestGuardCheckedAnswers: in the Checked mode the guard's answers follow
// the nodes': a superseded holder (its lock released and taken by
// another) gets 409, the new holder 200, and 503 while no quorum of the
// nodes answers, which admits nothing.
func TestGuardCheckedAnswers(t *testing.T) {
	c, old := lockOnNodes(t, "reports")
	g := fence.NewGuard(&fence.MemoryStore{}, fence.Checked(c))
	srv := httptest.NewServer(g.Middleware(fence.CleanPath, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("reports").Obtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if code, body := request(t, srv.URL+"/reports/q3", "old", fence.TokenHeader, old.Sequencer().String()); code != http.StatusConflict || !strings.Contains(body, "superseded") {
		t.Errorf("the old holder's request: %d %q, want 409 saying superseded", code, body)
	}
	if code, body := request(t, srv.URL+"/reports/q3", "new", fence.TokenHeader, l.Sequencer().String()); code != http.StatusOK {
		t.Errorf("the new holder's request: %d %q, want 200", code, body)
	}
	if code, _ := request(t, srv.URL+"/reports/q3", "bare", fence.TokenHeader, "5"); code != http.StatusBadRequest {
		t.Errorf("a bare token: %d, want 400", code)
	}
	_ = c.Close()
	if code, body := request(t, srv.URL+"/reports/q3", "closed", fence.TokenHeader, l.Sequencer().String()); code != http.StatusServiceUnavailable {
		t.Errorf("with the checker closed: %d %q, want 503", code, body)
	}
}

// TestGuardSignedAnswers: in the Signed mode a signed request passes and
// an older signed one is stale (409), a missing signature is 428, a wrong
// one 403, and a key shorter than 16 bytes makes the middleware answer
// 500; Do takes no signature, and a Guard given a nil Checker is invalid.
func TestGuardSignedAnswers(t *testing.T) {
	key := []byte("0123456789abcdef")
	g := fence.NewGuard(&fence.MemoryStore{}, fence.Signed(key))
	srv := httptest.NewServer(g.Middleware(fence.CleanPath, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv.Close)
	s10 := fence.Sequencer{Lock: "r", Kind: "plain", Token: 10}
	s9 := fence.Sequencer{Lock: "r", Kind: "plain", Token: 9}
	for _, tc := range []struct {
		hdr  []string
		want int
	}{
		{[]string{fence.TokenHeader, s10.String(), fence.SignatureHeader, fence.Sign(key, s10)}, http.StatusOK},
		{[]string{fence.TokenHeader, s9.String(), fence.SignatureHeader, fence.Sign(key, s9)}, http.StatusConflict},
		{[]string{fence.TokenHeader, s10.String()}, http.StatusPreconditionRequired},
		{[]string{fence.TokenHeader, s10.String(), fence.SignatureHeader, fence.Sign(key, s9)}, http.StatusForbidden},
	} {
		if code, body := request(t, srv.URL+"/r", "x", tc.hdr...); code != tc.want {
			t.Errorf("%v: %d %q, want %d", tc.hdr, code, body, tc.want)
		}
	}
	short := fence.NewGuard(&fence.MemoryStore{}, fence.Signed(key[:15]))
	srv2 := httptest.NewServer(short.Middleware(fence.CleanPath, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv2.Close)
	if code, _ := request(t, srv2.URL+"/r", "x", fence.TokenHeader, s10.String(), fence.SignatureHeader, fence.Sign(key[:15], s10)); code != http.StatusInternalServerError {
		t.Errorf("a 15-byte key: %d, want 500", code)
	}
	var nilChecker *redlock.Client
	err := fence.NewGuard(&fence.MemoryStore{}, fence.Checked(nilChecker)).Do(context.Background(), "r", s10, func(context.Context) error { return nil })
	if !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("Do with a nil Checker: %v, want ErrInvalid", err)
	}
}
