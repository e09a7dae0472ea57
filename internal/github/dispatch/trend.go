package dispatch

import (
	"context"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
)

// onDefaultBranch reports whether a check run measured the default branch,
// so its medians belong on the trend the dashboard draws and the
// change-point pass reads: the nightly tier, and the merge tier on a merge
// queue's group (the commit that lands on the default branch). The merge
// tier's key is "merge"; a day keeps its last merge group.
func (s *Service) onDefaultBranch(ctx context.Context, cr store.CheckRun) bool {
	if cr.Tier == string(check.TierNightly) {
		return true
	}
	if cr.Tier != string(check.TierMerge) || len(cr.JobIDs) == 0 {
		return false
	}
	j, err := s.judging().GetJob(ctx, cr.JobIDs[0])
	return err == nil && j.Kind == "merge_group"
}
