package rev

import "testing"

func TestShortAndLog(t *testing.T) {
	t.Parallel()
	const sha = "0123456789abcdef0123456789abcdef01234567"
	cases := []struct{ name, got, want string }{
		{"short", Short(sha), "0123456"},
		{"log", Log(sha), "0123456789ab"},
		{"short of a short id", Short("abc"), "abc"},
		{"log of an empty id", Log(""), ""},
		{"prefix", Prefix(sha, 3), "012"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}
