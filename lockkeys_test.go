package redlock

import (
	"errors"
	"testing"
)

func TestKeyHashTag(t *testing.T) {
	layout := &keyLayout{prefix: defaultConfig().prefix}
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"order:42", "{redlock:order:42}", true},
		{"{tenant}:x", "{redlock:{tenant}:x}", true},
		{"", "", false},
	}
	for _, tt := range tests {
		got, err := layout.redisKey(tt.name)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("redisKey(%q) = %q, %v; want %q ok=%v", tt.name, got, err, tt.want, tt.ok)
		}
	}
	layout.prefix = ""
	if _, err := layout.redisKey("}x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty hash tag accepted: %v", err)
	}
}
