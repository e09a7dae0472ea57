package web

import (
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// The check page words the escalation clock as a time, and a cleared clock
// (which the lifecycle's audit detail encodes as Go's zero time) as none —
// never "0001-01-01T00:00:00Z".
func TestEscalationAndHistoryWords(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		cr   CheckRun
		want string
	}{
		{CheckRun{State: "warned", Deadline: now.Add(3*time.Hour + 20*time.Minute)}, "escalates 2026-12-04 11:20 UTC (in 3 h 20 min)"},
		{CheckRun{State: "warned", Deadline: now.Add(72 * time.Hour)}, "(in 3 days)"},
		{CheckRun{State: "escalated", Deadline: now.Add(-time.Hour)}, "escalation deadline 2026-12-04 07:00 UTC (passed)"},
		{CheckRun{State: "passed"}, ""},
	}
	for _, tc := range cases {
		got := escalation(&tc.cr, now)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("escalation(%s, %v) = %q, want %q", tc.cr.State, tc.cr.Deadline, got, tc.want)
		}
	}
	rows := historyRows([]store.AuditEntry{
		{Action: "gate.pass", Detail: []byte(`{"deadline":"0001-01-01T00:00:00Z","sha":"1a95536cfa43be767a4c275a39b7be4808e9089c","runs":3}`)},
		{Action: "gate.regression", Detail: []byte(`{"deadline":"2026-12-04T11:20:00Z"}`)},
	})
	if got := words(rows[0].Detail); got != "deadline: none · runs: 3 · sha: 1a95536" {
		t.Errorf("cleared clock: %q", got)
	}
	if got := words(rows[1].Detail); got != "deadline: 2026-12-04 11:20 UTC" {
		t.Errorf("a deadline: %q", got)
	}
}

func words(kvs []kv) string {
	var parts []string
	for _, p := range kvs {
		parts = append(parts, p.K+": "+p.V)
	}
	return strings.Join(parts, " · ")
}
