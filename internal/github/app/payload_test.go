package app

import (
	"encoding/json"
	"testing"
	"time"
)

// Every form GitHub has dated a field in decodes; anything else is an
// error naming the value.
func TestHookTime(t *testing.T) {
	t.Parallel()
	want := time.Date(2018, 4, 25, 20, 42, 10, 0, time.UTC)
	for _, tc := range []struct {
		raw  string
		want time.Time
		bad  bool
	}{
		{raw: `"2018-04-25T20:42:10Z"`, want: want},
		{raw: `"2018-04-25T13:42:10-07:00"`, want: want},
		{raw: `"2018-04-25 20:42:10"`, want: want},
		{raw: `"2018-04-25T20:42:10"`, want: want},
		{raw: `"2018-04-25 22:42:10 +0200"`, want: want},
		{raw: `1524688930`, want: want},
		{raw: `null`},
		{raw: `""`},
		{raw: `"yesterday"`, bad: true},
		{raw: `{"at": 1}`, bad: true},
	} {
		var v struct {
			At hookTime `json:"at"`
		}
		err := json.Unmarshal([]byte(`{"at": `+tc.raw+`}`), &v)
		switch {
		case tc.bad && err == nil:
			t.Errorf("%s: decoded as %v, want an error", tc.raw, v.At.Time)
		case !tc.bad && err != nil:
			t.Errorf("%s: %v", tc.raw, err)
		case !tc.bad && !v.At.Equal(tc.want):
			t.Errorf("%s: %v, want %v", tc.raw, v.At.Time, tc.want)
		}
	}
}
