package inbox

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// Order places a webhook delivery in its pull request's history, from the
// event times GitHub put in its payload: a pull_request event stands at
// the pull request's updated_at, a comment on a pull request at the
// comment's. Deliveries of one pull request are then processed one at a
// time in that order (store.DeliveryOrder), whatever order GitHub's
// retries and redeliveries bring them in. Events about no pull request,
// and payloads that do not parse (the handler reports those), keep no
// order.
func Order(event string, payload []byte) store.DeliveryOrder {
	var p orderPayload
	if err := json.Unmarshal(payload, &p); err != nil || p.Repository.FullName == "" {
		return store.DeliveryOrder{}
	}
	var (
		number int
		at     time.Time
	)
	switch {
	case p.PullRequest != nil:
		number, at = p.PullRequest.Number, p.PullRequest.UpdatedAt.Time
	case p.Issue != nil && p.Issue.PullRequest != nil:
		number = p.Issue.Number
		if p.Comment != nil {
			at = p.Comment.UpdatedAt.Time
			if event == "issue_comment" && p.Action == "created" || at.IsZero() {
				at = p.Comment.CreatedAt.Time
			}
		}
		if at.IsZero() {
			at = p.Issue.UpdatedAt.Time
		}
	}
	if number <= 0 {
		return store.DeliveryOrder{}
	}
	return store.DeliveryOrder{Subject: fmt.Sprintf("%s#%d", p.Repository.FullName, number), At: at}
}

// orderPayload is the part of a webhook payload Order reads.
type orderPayload struct {
	Action     string `json:"action"`
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	PullRequest *struct {
		Number    int       `json:"number"`
		UpdatedAt eventTime `json:"updated_at"`
	} `json:"pull_request"`
	Issue *struct {
		Number      int       `json:"number"`
		UpdatedAt   eventTime `json:"updated_at"`
		PullRequest *struct{} `json:"pull_request"` // null or absent on a plain issue
	} `json:"issue"`
	Comment *struct {
		CreatedAt eventTime `json:"created_at"`
		UpdatedAt eventTime `json:"updated_at"`
	} `json:"comment"`
}

// eventTime is a time in a payload, read as GitHub has written them
// (RFC 3339, or the older "2006-01-02 15:04:05" in UTC). One it cannot
// read is zero rather than an error: an error would lose the whole
// payload's order over one field, a zero time only this one's.
type eventTime struct{ time.Time }

func (t *eventTime) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05"} {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v
			return nil
		}
	}
	return nil
}
