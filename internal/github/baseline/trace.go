package baseline

import "github.com/perfgate/perfgate/internal/analysis/promotion"

// The traceability rule is pure and lives in internal/analysis/promotion;
// these names keep this package's readers (recipe.go, the tests) short.
var (
	pinnedImage    = promotion.PinnedImage
	engineIdentity = promotion.EngineIdentity
	worseMetrics   = promotion.WorseMetrics
)
