package drift

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/perfgate/perfgate/internal/store"
)

// slack posts one message to a Slack-compatible incoming webhook
// ({"text": …}, which Slack, Mattermost and Rocket.Chat accept).
func (p *Pass) slack(ctx context.Context, url string, rec store.ChangePointRecord) error {
	text := fmt.Sprintf(":warning: perfgate: *%s* %s on `%s` of %s since %s (commits %s..%s, p=%.2g)",
		rec.Metric, pct(rec.Change), rec.Key, rec.Repo, rec.Day.Format("2006-01-02"), short(rec.GoodSHA), short(rec.BadSHA), rec.PValue)
	if rec.IssueURL != "" {
		text += "\nIssue: " + rec.IssueURL
	}
	if p.o.Links != nil {
		text += "\nDashboard: " + p.o.Links.SeriesURL(rec.Repo, rec.Key, rec.Metric)
	}
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
