package check

import (
	"slices"
	"testing"
)

func TestPhaseShows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		phase              Phase
		status, conclusion string
		buttons            []string
	}{
		{None, "queued", "", nil},
		{Queued, "queued", "", nil},
		{InProgress, "in_progress", "", nil},
		{Passed, "completed", "success", nil},
		{Accepted, "completed", "success", nil},
		{Warned, "completed", "neutral", []string{"retest", "appeal"}},
		{Escalated, "completed", "failure", []string{"retest", "appeal"}},
		{Inconclusive, "completed", "neutral", []string{"retest"}},
		{NeedsAck, "completed", "action_required", []string{"retest"}},
		{Errored, "completed", "failure", []string{"retest"}},
		{Skipped, "completed", "skipped", nil},
		{Superseded, "completed", "cancelled", nil},
		{Closed, "completed", "cancelled", nil},
		{Waiting, "completed", "action_required", []string{"approve"}},
		{ConfigError, "completed", "failure", nil},
		{NotConfigured, "completed", "neutral", nil},
	}
	for _, tt := range tests {
		status, conclusion := tt.phase.Check()
		if status != tt.status || conclusion != tt.conclusion || tt.phase.Conclusion() != tt.conclusion {
			t.Errorf("%q shows %s/%s (Conclusion %q), want %s/%s", tt.phase, status, conclusion, tt.phase.Conclusion(), tt.status, tt.conclusion)
		}
		var ids []string
		for _, b := range Buttons(tt.phase) {
			ids = append(ids, b.Identifier)
		}
		if !slices.Equal(ids, tt.buttons) {
			t.Errorf("%q offers %v, want %v", tt.phase, ids, tt.buttons)
		}
	}
}

func TestTierNames(t *testing.T) {
	t.Parallel()
	for _, tier := range []Tier{TierQuick, TierMerge, TierNightly} {
		if got, ok := TierFromCheckName(CheckName(tier)); !ok || got != tier {
			t.Errorf("TierFromCheckName(CheckName(%s)) = %s, %v", tier, got, ok)
		}
	}
	for _, name := range []string{"perfgate / weekly", "quick", "other / quick"} {
		if _, ok := TierFromCheckName(name); ok {
			t.Errorf("TierFromCheckName(%q) accepted", name)
		}
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("Truncate kept %q", got)
	}
	long := string(make([]rune, 100))
	got := Truncate(long, 40)
	if n := len([]rune(got)); n != 40 {
		t.Errorf("Truncate to 40 gave %d characters", n)
	}
}
