// Package check is the vocabulary of a perfgate check run that the GitHub
// handlers (internal/github/app), the domain (dispatch, bisectjob, the lifecycle
// in checkstate) and the store share: a run's tier and name, the phase it
// is in (one enum: the lifecycle's state, the store's state string and the
// conclusion GitHub shows), and its output. It imports nothing of
// perfgate's, so every layer can use it and none has to import the GitHub
// layer for it.
package check

import "strings"

// Tier is a benchmark tier; each has its own check run per head SHA.
type Tier string

// Tiers.
const (
	TierQuick   Tier = "quick"
	TierMerge   Tier = "merge"
	TierNightly Tier = "nightly"
	// The long-run tiers (the repository's capacity: and soak: sections):
	// a sweep to the knee of base and head, and a long soak of the head.
	TierCapacity Tier = "capacity"
	TierSoak     Tier = "soak"
)

// LongRun reports whether t is a long-run tier, judged by its own judge
// rather than the gate.
func (t Tier) LongRun() bool { return t == TierCapacity || t == TierSoak }

// CheckName is the check run name of a tier, e.g. "perfgate / quick".
func CheckName(t Tier) string { return "perfgate / " + string(t) }

// TierFromCheckName parses a name CheckName made.
func TierFromCheckName(name string) (Tier, bool) {
	t, ok := strings.CutPrefix(name, "perfgate / ")
	switch Tier(t) {
	case TierQuick, TierMerge, TierNightly, TierCapacity, TierSoak:
		return Tier(t), ok
	}
	return "", false
}
