package fleet

import "time"

// Stream is work that arrives: jobs of one class, tenant, tier and pool
// (Pool's name), PerHour of them an hour, each charged Cost to its
// tenant (see Streams).
type Stream struct {
	Priority   int
	Tenant     string
	Tier, Pool string
	PerHour    float64
	Cost       float64
}

// Arrival rates are observed over two windows: a class's rate over the
// last ArrivalWindow (it follows the day), split between tenants, tiers
// and pools as over the last MixWindow (tenants that queue rarely, whose
// jobs overtake longer lines, show up in a longer window).
const (
	ArrivalWindow = time.Hour
	MixWindow     = 6 * time.Hour
)

// Arrived counts the jobs of one class, tenant, tier and pool queued
// over the last MixWindow, Recent of them over the last ArrivalWindow,
// and their mean cost.
type Arrived struct {
	Priority   int
	Tenant     string
	Tier, Pool string
	Count      int
	Recent     int
	Cost       float64
}

// Streams are the arrival rates the counts say: each class's recent rate
// split as its mix over the longer window.
func Streams(counts []Arrived) []Stream {
	total, recent := map[int]int{}, map[int]int{}
	for _, c := range counts {
		total[c.Priority] += c.Count
		recent[c.Priority] += c.Recent
	}
	var out []Stream
	for _, c := range counts {
		if c.Count == 0 || recent[c.Priority] == 0 {
			continue
		}
		rate := float64(recent[c.Priority]) / ArrivalWindow.Hours() * float64(c.Count) / float64(total[c.Priority])
		out = append(out, Stream{Priority: c.Priority, Tenant: c.Tenant, Tier: c.Tier, Pool: c.Pool, PerHour: rate, Cost: c.Cost})
	}
	return out
}
