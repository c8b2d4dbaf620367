package fence_test

import (
	"context"
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
	code, body := request(t, srv.URL+"/reports/q3", "forged", forged...)
	if code == http.StatusOK {
		t.Errorf("forged header %v: 200, want it refused", forged)
	}
	code, body = request(t, srv.URL+"/reports/q3", "real", holder...)
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
