// Package fleet is the policy of a GPU fleet shared by many repositories,
// as pure functions the store, the dispatcher and the commands call: the
// priority classes jobs are claimed in, the fair-share keys and weights,
// the labels a runner's cards give it, the queue-position estimate a
// queued check shows, and GPU-hour accounting by repository, tier and week.
// It knows nothing about the database or HTTP.
package fleet

// Priority classes, claimed in this order (lower first). Within a class
// the fair share decides between repositories; within a repository the
// queue order does.
const (
	// PriorityMerge: merge-queue (merge_group) and merge-tier jobs: a merge
	// waits on them.
	PriorityMerge = 0
	// PriorityQuick: the quick screen of every push.
	PriorityQuick = 1
	// PriorityNightly: the nightly matrix.
	PriorityNightly = 2
	// PriorityBatch: bisects and any other background work.
	PriorityBatch = 3
)

// Priority is the class of a job of tier, queued by trigger kind.
func Priority(tier, kind string) int {
	switch {
	case kind == "merge_group" || tier == "merge":
		return PriorityMerge
	case kind == "bisect":
		return PriorityBatch
	case kind == "nightly" || tier == "nightly":
		return PriorityNightly
	case tier == "quick":
		return PriorityQuick
	}
	return PriorityBatch
}

// PriorityName names a class for people.
func PriorityName(p int) string {
	switch p {
	case PriorityMerge:
		return "merge"
	case PriorityQuick:
		return "quick"
	case PriorityNightly:
		return "nightly"
	}
	return "batch"
}
