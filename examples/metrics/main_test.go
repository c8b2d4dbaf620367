package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServesMetricsWhileRunning(t *testing.T) {
	r, w := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), []string{"-addr", "127.0.0.1:0", "-for", "2s", "-workers", "4"}, w, io.Discard)
		w.Close()
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "serving ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	go io.Copy(io.Discard, r)
	time.Sleep(time.Second)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`redlock_acquire_total{lock="job",lock_kind="plain",result="obtained"}`, "redlock_held_locks", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	if c := <-code; c != 0 {
		t.Errorf("run returned %d", c)
	}
}
