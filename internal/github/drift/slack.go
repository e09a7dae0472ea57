package drift

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// slackText is an event's one message: the leader, how many change
// points moved with it, the commits, the issue and the dashboard.
func (p *Pass) slackText(e *event) string {
	rec := e.leader()
	text := fmt.Sprintf(":warning: perfgate: *%s* %s on `%s` of %s since %s (commits %s..%s)",
		rec.Metric, pct(rec.Change), rec.Key, rec.Repo, rec.Day.Format("2006-01-02"), rev.Short(rec.GoodSHA), rev.Short(rec.BadSHA))
	if n := len(e.members) - 1; n > 0 {
		text += fmt.Sprintf(", with %d more change point%s of the same step", n, plural(n))
	}
	if e.cost != nil && e.cost.Unpriced == "" {
		text += "\nCost if it stays: " + e.cost.Plain()
	}
	if e.total != "" {
		text += "\n" + e.total
	}
	if e.url != "" {
		text += "\nIssue (updated there, not here): " + e.url
	}
	if p.o.Links != nil {
		text += "\nDashboard: " + p.o.Links.SeriesURL(rec.Repo, rec.Key, rec.Metric)
	}
	return text
}

// retractText tells Slack an alert it heard is withdrawn.
func (p *Pass) retractText(num int, recs []store.ChangePointRecord) string {
	text := fmt.Sprintf(":white_check_mark: perfgate: retracted — the regression of %s reported since %s is no longer found (the series came back)",
		recs[0].Repo, recs[0].Day.Format("2006-01-02"))
	if recs[0].IssueURL != "" {
		text += "; issue closed: " + recs[0].IssueURL
	} else {
		text += fmt.Sprintf("; issue #%d closed", num)
	}
	return text
}

// post sends one message to a Slack-compatible incoming webhook
// ({"text": …}, which Slack, Mattermost and Rocket.Chat accept).
func (p *Pass) post(ctx context.Context, url, text string) error {
	body, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("slack webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.o.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("slack webhook: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("slack webhook answered %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
