package drift

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// slackURL is the repository's incoming webhook: its own entry, else its
// organisation's; "" when Slack is not told.
func (p *Pass) slackURL(repo string) string {
	if u := p.o.Config.Slack[repo]; u != "" {
		return u
	}
	owner, _, _ := strings.Cut(repo, "/")
	return p.o.Config.Slack[owner]
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
