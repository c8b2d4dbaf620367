package fence

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// files is a tiny file service behind the guard: PUT /files/NAME stores
// the body, in the order the handler runs.
type files struct {
	mu     sync.Mutex
	data   map[string]string
	writes []string
}

func (f *files) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if wait := r.Header.Get("X-Wait"); wait != "" {
		<-waits[wait]
	}
	f.mu.Lock()
	f.data[r.URL.Path] = string(b)
	f.writes = append(f.writes, string(b))
	f.mu.Unlock()
}

func (f *files) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

var waits = map[string]chan struct{}{}

func put(t *testing.T, url string, token string, body string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func byPath(r *http.Request) string { return r.URL.Path }

func TestGuardMiddleware(t *testing.T) {
	f := &files{data: map[string]string{}}
	srv := httptest.NewServer(NewGuard(&MemoryStore{}).Middleware(byPath, f))
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()
	for _, st := range []struct {
		path, token string
		code        int
		body        string // in the answer
	}{
		{"/a", "10", 200, ""},
		{"/a", "10", 200, ""}, // equal tokens pass
		{"/a", "12", 200, ""},
		{"/a", "11", 409, "stale token 11: the resource has seen token 12"},
		{"/b", "11", 200, ""}, // per resource
		{"/a", "", 428, "missing"},
		{"/a", "x1", 400, "malformed"},
		{"/a", "-3", 409, "negative"},
	} {
		code, body := put(t, srv.URL+st.path, st.token, st.path+"@"+st.token)
		if code != st.code || !strings.Contains(body, st.body) {
			t.Fatalf("PUT %s token %q: %d %q; want %d with %q", st.path, st.token, code, body, st.code, st.body)
		}
	}
	if got := strings.Join(f.writes, " "); got != "/a@10 /a@10 /a@12 /b@11" {
		t.Fatalf("writes %s", got)
	}
}

// TestGuardSerializes: a request admitted with token 5 still working when
// token 6 arrives makes 6 wait, so 6's work lands after 5's; without the
// guard (the control) 6 lands first and 5 overwrites it.
func TestGuardSerializes(t *testing.T) {
	for _, guarded := range []bool{true, false} {
		f := &files{data: map[string]string{}}
		var h http.Handler = f
		if guarded {
			h = NewGuard(&MemoryStore{}).Middleware(byPath, f)
		}
		srv := httptest.NewServer(h)
		key := strconv.FormatBool(guarded)
		waits[key] = make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			put(t, srv.URL+"/x", "5", "five", "X-Wait", key)
		}()
		time.Sleep(100 * time.Millisecond) // five is in its handler (or queued)
		done := make(chan struct{})
		go func() {
			defer close(done)
			put(t, srv.URL+"/x", "6", "six")
		}()
		if guarded {
			time.Sleep(100 * time.Millisecond) // six waits behind five
		} else {
			for f.count() == 0 { // six has written
				time.Sleep(5 * time.Millisecond)
			}
		}
		close(waits[key])
		wg.Wait()
		<-done
		srv.Close()
		want := map[bool]string{true: "five six", false: "six five"}[guarded]
		if got := strings.Join(f.writes, " "); got != want {
			t.Fatalf("guarded %v: writes %q, want %q", guarded, got, want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// failing is a GuardStore that fails: a store's outage cannot be made real
// in memory.
type failing struct{}

func (failing) Admit(context.Context, string, Sequencer) (Sequencer, bool, error) {
	return Sequencer{}, false, errors.New("store down")
}

func TestGuardDo(t *testing.T) {
	ctx := context.Background()
	g := NewGuard(&MemoryStore{}, AllowNegative())
	run := func(res string, token int64) error {
		return g.Do(ctx, res, Token(token), func(context.Context) error { return nil })
	}
	if err := run("r", -7); err != nil {
		t.Fatalf("negative token with AllowNegative: %v", err)
	}
	if err := run("r", -6); err != nil {
		t.Fatal(err)
	}
	var se *StaleError
	if err := run("r", -7); !errors.As(err, &se) || se.Fence != -6 {
		t.Fatalf("older negative token: %v", err)
	}
	if err := run("", 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty resource: %v", err)
	}
	if len(g.busy) != 0 {
		t.Fatalf("%d resources still tracked", len(g.busy))
	}
	if err := NewGuard(failing{}).Do(ctx, "r", Token(1), func(context.Context) error { return nil }); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Fatalf("store error: %v", err)
	}
	srv := httptest.NewServer(NewGuard(failing{}).Middleware(byPath, http.NotFoundHandler()))
	defer srv.Close()
	if code, _ := put(t, srv.URL+"/a", "1", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("store error: %d, want 503", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestGuardStalledBody: the holder of token 5 sends its headers and part
// of its body, then stalls (a paused client, a slow link). The holder of
// token 6 must not wait for it: its PUT lands while 5 is still stalled.
// When 5's body finally arrives, its write is refused (409), and only
// six's body is stored.
func TestGuardStalledBody(t *testing.T) {
	f := &files{data: map[string]string{}}
	arrived := make(chan string, 2)
	guarded := NewGuard(&MemoryStore{}).Middleware(byPath, f)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get(TokenHeader)
		guarded.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()

	body, stall := io.Pipe()
	five := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/x", body)
		req.Header.Set(TokenHeader, "5")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			five <- 0
			return
		}
		resp.Body.Close()
		five <- resp.StatusCode
	}()
	if _, err := io.WriteString(stall, "fi"); err != nil { // the client is sending it
		t.Fatal(err)
	}
	<-arrived

	// Six's PUT, while five stalls: it must not wait for five's body (a
	// generous bound, far above a PUT on loopback; without it the test
	// would wait for ever).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/x", strings.NewReader("six"))
	req.Header.Set(TokenHeader, "6")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("six's PUT while five's body stalls: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("six's PUT: %d, want 200", resp.StatusCode)
		}
	}

	if _, err := io.WriteString(stall, "ve"); err != nil {
		t.Fatal(err)
	}
	stall.Close()
	if code := <-five; code != http.StatusConflict {
		t.Errorf("five's PUT, once its body came: %d, want 409", code)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := strings.Join(f.writes, " "); got != "six" {
		t.Errorf("writes %q, want six's alone", got)
	}
}

// TestGuardMaxBody: a body over the limit is answered 413 and admits
// nothing (a lower token passes after it); 0 refuses every body; a
// negative limit is a 500 saying so; the default is 10 MiB.
func TestGuardMaxBody(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	for _, tc := range []struct {
		opts  []Option
		steps []struct {
			token, body string
			code        int
		}
	}{
		{[]Option{MaxBody(4)}, []struct {
			token, body string
			code        int
		}{{"9", "12345", 413}, {"3", "1234", 200}, {"2", "", 409}}},
		{[]Option{MaxBody(0)}, []struct {
			token, body string
			code        int
		}{{"9", "x", 413}, {"3", "", 200}}},
		{[]Option{MaxBody(-1)}, []struct {
			token, body string
			code        int
		}{{"9", "", 500}}},
	} {
		f := &files{data: map[string]string{}}
		srv := httptest.NewServer(NewGuard(&MemoryStore{}, tc.opts...).Middleware(byPath, f))
		for _, st := range tc.steps {
			code, body := put(t, srv.URL+"/x", st.token, st.body)
			if code != st.code {
				t.Errorf("%d options, token %s, %d bytes: %d %q; want %d", len(tc.opts), st.token, len(st.body), code, body, st.code)
			}
		}
		srv.Close()
	}
	// The default, 10 MiB, without a network.
	req := httptest.NewRequest(http.MethodPut, "/x", strings.NewReader(strings.Repeat("x", 10<<20+1)))
	req.Header.Set(TokenHeader, "9")
	rec := httptest.NewRecorder()
	NewGuard(&MemoryStore{}).Middleware(byPath, &files{data: map[string]string{}}).ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("default limit, 10 MiB + 1 byte: %d; want 413", rec.Code)
	}
}

func TestCleanPath(t *testing.T) {
	for raw, want := range map[string]string{
		"/reports/q3":        "/reports/q3",
		"/reports//q3":       "/reports/q3",
		"/reports/./q3":      "/reports/q3",
		"/reports/q3/":       "/reports/q3",
		"/reports/x/../q3":   "/reports/q3",
		"/reports/%71%33":    "/reports/q3",
		"/../../etc/passwd":  "/etc/passwd",
		"/":                  "/",
		"/reports/q3/.":      "/reports/q3",
		"/reports/q3%2F..":   "/reports",
		"/a/b/../../../../c": "/c",
	} {
		r := httptest.NewRequest(http.MethodPut, "http://example.com"+raw, nil)
		if got := CleanPath(r); got != want {
			t.Errorf("CleanPath(%s) = %s, want %s", raw, got, want)
		}
	}
}
