package failpoint

import "testing"

func TestClassify(t *testing.T) {
	lock := "{redlock:fp}"
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"evalsha", "abc", "3", lock, lock + ":fence", "{redlock:}:epoch", "v", int64(500)}, AcquireReply},
		{[]any{"fcall", "redlock_acquire_0123456789abcdef", "3", lock, lock + ":fence", "{redlock:}:epoch", "v", int64(500)}, AcquireReply},
		{[]any{"eval", "src", "3", lock, lock + ":fence", "{redlock:}:epoch", "w", "", "id", int64(500)}, AcquireReply},
		{[]any{"evalsha", "abc", "1", lock + ":fence", int64(7), int64(0)}, Fence},
		{[]any{"evalsha", "abc", 2, lock + ":fence", lock, int64(7), int64(0), "o"}, Fence},
		{[]any{"evalsha", "abc", "3", lock, "{redlock:}:epoch", lock + ":fence", "v", "500", int64(7)}, RefreshBatch},
		{[]any{"evalsha", "abc", "2", lock, lock + ":fence", "v", "", "0", int64(7), int64(3600000)}, Release},
		// The layouts before issue 44.
		{[]any{"evalsha", "abc", 2, lock, "{redlock:}:epoch", "v", "500"}, RefreshBatch},
		{[]any{"evalsha", "abc", "1", lock, "v", "0"}, Release},
		{[]any{"evalsha", "abc", "1", "{redlock:}:epoch"}, ""},
		{[]any{"get", lock}, ""},
		{[]any{"evalsha", "abc", "x", lock}, ""},
		{[]any{"evalsha", "abc", "3", lock}, ""},
	} {
		if got := Classify(tc.args); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
