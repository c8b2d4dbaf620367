package script

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

func TestDecodeAcquire(t *testing.T) {
	tests := []struct {
		reply   any
		want    Acquired
		wantErr bool
	}{
		{[]any{int64(1)}, Acquired{OK: true}, false},
		{[]any{int64(0), int64(1500)}, Acquired{HolderTTL: 1500 * time.Millisecond}, false},
		{[]any{int64(0), int64(-1)}, Acquired{HolderTTL: -time.Millisecond}, false},
		{[]any{int64(0)}, Acquired{}, true},
		{[]any{int64(7)}, Acquired{}, true},
		{[]any{"1"}, Acquired{}, true},
		{[]any{}, Acquired{}, true},
		{int64(1), Acquired{}, true},
		{nil, Acquired{}, true},
	}
	for _, tt := range tests {
		got, err := decodeAcquire(tt.reply)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("decodeAcquire(%#v) = %+v, %v; want %+v, error %v", tt.reply, got, err, tt.want, tt.wantErr)
		}
	}
}

// FuzzDecodeAcquire feeds replies of arbitrary shape: decoding must never
// panic, and must accept only the two documented forms.
func FuzzDecodeAcquire(f *testing.F) {
	f.Add(int64(1), int64(0), uint8(1), false)
	f.Add(int64(0), int64(99), uint8(2), false)
	f.Add(int64(0), int64(99), uint8(2), true)
	f.Fuzz(func(t *testing.T, status, pttl int64, n uint8, asString bool) {
		reply := make([]any, n%4)
		for i := range reply {
			v := any(status)
			if i == 1 {
				v = pttl
			}
			if asString {
				v = "x"
			}
			reply[i] = v
		}
		got, err := decodeAcquire(reply)
		if err != nil {
			return
		}
		valid := !asString && len(reply) >= 1 && (status == 1 || (status == 0 && len(reply) >= 2))
		if !valid {
			t.Fatalf("accepted %#v as %+v", reply, got)
		}
		if got.OK != (status == 1) {
			t.Fatalf("decoded %#v as %+v", reply, got)
		}
	})
}

func TestScriptsOnRedis(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	a, err := Acquire(ctx, c, "k", "mine", time.Minute)
	if err != nil || !a.OK {
		t.Fatalf("Acquire on a free key: %+v, %v", a, err)
	}
	// The same request again (a client retry after a lost reply) is a
	// success, not "held by another owner".
	if a, err := Acquire(ctx, c, "k", "mine", time.Minute); err != nil || !a.OK {
		t.Fatalf("Acquire again with our value: %+v, %v; want OK", a, err)
	}
	a, err = Acquire(ctx, c, "k", "theirs", time.Minute)
	if err != nil || a.OK || a.HolderTTL <= 0 || a.HolderTTL > time.Minute {
		t.Fatalf("Acquire of a held key: %+v, %v; want the holder's TTL", a, err)
	}
	if r, err := Release(ctx, c, "k", "theirs", "k:released", false); err != nil || r.Deleted {
		t.Fatalf("Release by a non-owner: %+v, %v; want not deleted", r, err)
	}
	if r, err := Refresh(ctx, c, "k", "theirs", time.Minute); err != nil || r != NotOwner {
		t.Fatalf("Refresh by a non-owner: %v, %v; want NotOwner", r, err)
	}
	if r, err := Refresh(ctx, c, "k", "mine", 2*time.Minute); err != nil || r != Extended {
		t.Fatalf("Refresh by the owner: %v, %v; want Extended", r, err)
	}
	// A shorter refresh (say an older one, delayed) never shortens the key.
	if r, err := Refresh(ctx, c, "k", "mine", time.Second); err != nil || r != Extended {
		t.Fatalf("shorter Refresh: %v, %v; want Extended", r, err)
	}
	if pttl := c.PTTL(ctx, "k").Val(); pttl <= time.Minute {
		t.Fatalf("PTTL after a shorter refresh: %v, want still above 1m", pttl)
	}
	sub := c.Subscribe(ctx, "k:released")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	if r, err := Release(ctx, c, "k", "mine", "k:released", false); err != nil || !r.Deleted || r.Receivers != 1 {
		t.Fatalf("Release by the owner: %+v, %v; want deleted, heard by 1", r, err)
	}
	if m, err := sub.ReceiveMessage(ctx); err != nil || m.Channel != "k:released" {
		t.Fatalf("release notification: %v, %v", m, err)
	}
	if r, err := Refresh(ctx, c, "k", "mine", time.Minute); err != nil || r != Reseeded {
		t.Fatalf("Refresh of a missing key: %v, %v; want Reseeded", r, err)
	}
	if err := c.RPush(ctx, "list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(ctx, c, "list", "mine", time.Minute); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("Acquire on a list: %v, want WRONGTYPE", err)
	}
}
