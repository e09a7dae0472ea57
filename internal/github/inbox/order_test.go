package inbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// Order keys a delivery to its pull request and the event's own time, from
// the recorded webhook payloads; events about no pull request keep none.
func TestOrder(t *testing.T) {
	t.Parallel()
	pr17 := func(at string) store.DeliveryOrder {
		ts, err := time.Parse(time.RFC3339, at)
		if err != nil {
			t.Fatal(err)
		}
		return store.DeliveryOrder{Subject: "acme/inference#17", At: ts}
	}
	for _, tc := range []struct {
		event, file string
		want        store.DeliveryOrder
	}{
		{"pull_request", "pull_request/opened.json", pr17("2024-05-14T10:00:00Z")},
		{"pull_request", "pull_request/closed.json", pr17("2026-12-03T10:15:00Z")},
		{"pull_request", "pull_request/synchronize.json", pr17("2024-05-14T10:00:00Z")},
		{"issue_comment", "issue_comment/created.retest.json", pr17("2024-05-14T10:00:00Z")},
		{"issue_comment", "issue_comment/edited.retest.json", pr17("2024-05-14T10:00:00Z")},
		// An old-format timestamp elsewhere in the payload costs nothing.
		{"issue_comment", "published/issue_comment/created.retest.odd_fields.json", pr17("2024-05-14T10:00:00Z")},
		{"pull_request", "published/pull_request/opened.odd_fields.json", pr17("2024-05-14T10:00:00Z")},
		{"issue_comment", "published/issue_comment/created.plain_issue.json", store.DeliveryOrder{}},
		{"merge_group", "merge_group/checks_requested.json", store.DeliveryOrder{}},
		{"installation", "installation/created.json", store.DeliveryOrder{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			payload, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "webhooks", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := Order(tc.event, payload); got.Subject != tc.want.Subject || !got.At.Equal(tc.want.At) {
				t.Errorf("Order = %+v, want %+v", got, tc.want)
			}
		})
	}
	// A comment on an issue that is not a pull request, and a payload
	// that does not parse, keep no order.
	for name, payload := range map[string]string{
		"issue":                          `{"action":"created","repository":{"full_name":"acme/inference"},"issue":{"number":3},"comment":{"created_at":"2026-12-01T00:00:00Z"}}`,
		"issue with a null pull_request": `{"action":"created","repository":{"full_name":"acme/inference"},"issue":{"number":3,"pull_request":null},"comment":{"created_at":"2026-12-01T00:00:00Z"}}`,
		"garbage":                        `{"repository":`,
	} {
		if got := Order("issue_comment", []byte(payload)); got != (store.DeliveryOrder{}) {
			t.Errorf("%s: Order = %+v, want none", name, got)
		}
	}
}

// BenchmarkOrder is what keying a delivery adds to the webhook's
// acknowledgement (it runs before the 2xx): one decode of the payload.
func BenchmarkOrder(b *testing.B) {
	payload, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "webhooks", "pull_request", "opened.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if Order("pull_request", payload).Subject == "" {
			b.Fatal("no subject")
		}
	}
}
