package dispatch

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// A run plans from the config the handler read and decided by, carried in
// the request: the dispatcher does not read the file a second time (a
// second read could see a different file). A request without one (the
// nightly) reads it.
func TestRunPlansFromTheConfigItCarries(t *testing.T) {
	const contents = "/repos/acme/unconfigured/contents/" + config.DefaultPath
	tests := []struct {
		name      string
		carried   *config.Config
		wantErr   error // nil: the check row and its jobs are recorded
		wantReads int
	}{
		{"carried: planned without reading", config.Default(), nil, 0},
		{"none carried: read, and the repository has no file", nil, repoconfig.ErrNotConfigured, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			gh := ghtest.New(t)
			svc, st := newService(t, gh, filepath.Join(t.TempDir(), "db"), &testClock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)})
			defer st.Close()
			// acme/unconfigured has no perfgate.yml on any ref.
			err := svc.RequestRun(ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "unconfigured", PR: 5,
				HeadSHA: headSHA, BaseSHA: baseSHA, BaseRef: "main", ConfigRef: "main", Tier: check.TierQuick, Trigger: "pull_request.opened",
				DeliveryID: "d-" + tt.name, Config: tt.carried})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("RequestRun: %v, want %v", err, tt.wantErr)
			}
			if n := len(gh.RequestsTo("GET", contents)); n != tt.wantReads {
				t.Errorf("%d reads of the config, want %d", n, tt.wantReads)
			}
			row, found, err := svc.row(ctx, "acme/unconfigured", headSHA, string(check.TierQuick))
			if err != nil {
				t.Fatal(err)
			}
			if recorded := found && len(row.JobIDs) > 0; recorded != (tt.wantErr == nil) {
				t.Errorf("check row recorded with jobs: %v (row %+v)", recorded, row)
			}
		})
	}
}
