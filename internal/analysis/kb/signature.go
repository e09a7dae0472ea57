// Package kb is the matching of perfgate's knowledge base of regressions:
// every finding a maintainer records (/perf rootcause, or the dashboard)
// keeps its phenomenon — which metrics moved, which way and how much, and
// the profile diff's fingerprint when there is one — with the commit that
// caused it, the cause and the fix. A new regression whose signature is
// close to a recorded one is named in its check run ("looks like #123: …"),
// so the next regression of a known kind is recognised at once. This
// package is pure: signatures, their similarity, the ranking of records
// and the words of a match; internal/github/kb keeps the records in the
// store.
package kb

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/profile"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// MetricChange is one gated metric's move, base to head, as the gate
// reports it (gate.MetricResult's Metric, Delta, Direction, Significant).
type MetricChange struct {
	Metric    string           `json:"metric"`
	Change    float64          `json:"change"` // head/base − 1, by value
	Direction config.Direction `json:"direction,omitempty"`
	// Moved: the gate found the change significant. Only moved metrics
	// shape the signature; the others count as unchanged.
	Moved bool `json:"moved"`
}

// Signature is a regression's phenomenon.
type Signature struct {
	Metrics []MetricChange `json:"metrics"`
	// Profile is the base → head profile diff's fingerprint
	// (profile.Diff.Fingerprint), when a profile was taken.
	Profile *profile.Fingerprint `json:"profile,omitempty"`
}

// worse is a change as a signed, log-scaled number: log(head/base),
// positive when the metric got worse, so a throughput drop and a latency
// rise point the same way.
func (m MetricChange) worse() float64 {
	if !(m.Change > -1) || math.IsInf(m.Change, 0) {
		return 0
	}
	d := m.Direction
	if d == "" {
		if known, ok := config.LookupMetric(m.Metric); ok {
			d = known.Natural
		}
	}
	return d.Sign() * math.Log1p(m.Change)
}

// metricVector maps each metric to its component: the worse-signed log
// change when it moved, 0 when it did not. When no metric is marked moved
// (a signature from a report without significance), every change counts.
func (s Signature) metricVector() map[string]float64 {
	anyMoved := false
	for _, m := range s.Metrics {
		anyMoved = anyMoved || m.Moved
	}
	v := make(map[string]float64, len(s.Metrics))
	for _, m := range s.Metrics {
		if m.Moved || !anyMoved {
			v[m.Metric] = m.worse()
		} else {
			v[m.Metric] = 0
		}
	}
	return v
}

// Distance is the cosine distance between two signatures, in [0, 2]: 0 is
// the same shape, 1 unrelated, 2 opposite. Each part — the metric changes
// (over the metrics both measured) and the profile fingerprints (over the
// keys both have) — is compared by its cosine, and the distance is one
// minus their mean: the cosine of the two parts concatenated after each is
// scaled to unit length, so neither drowns the other whatever its size.
//
// Cosine, because a cause shows as a direction, not a size: a scheduler
// change that doubles prefill interruptions and one that triples them move
// the same metrics the same way by different amounts. Log-scaled, signed
// components make a throughput drop and a latency rise alike and an
// improvement the opposite of a regression.
//
// A part either side lacks (no profile, no shared metric, nothing moved) is
// left out; with no part in common the distance is +Inf.
func Distance(a, b Signature) float64 {
	var cos []float64
	if c, ok := cosine(a.metricVector(), b.metricVector()); ok {
		cos = append(cos, c)
	}
	if a.Profile != nil && b.Profile != nil {
		if c, ok := cosine(vector(a.Profile), vector(b.Profile)); ok {
			cos = append(cos, c)
		}
	}
	if len(cos) == 0 {
		return math.Inf(1)
	}
	sum := 0.0
	for _, c := range cos {
		sum += c
	}
	return 1 - sum/float64(len(cos))
}

// vector keys a fingerprint's values by metric, so fingerprints of two
// perfgate versions compare over the metrics both have.
func vector(f *profile.Fingerprint) map[string]float64 {
	v := make(map[string]float64, len(f.Keys))
	for i, k := range f.Keys {
		if i < len(f.Values) && !math.IsNaN(f.Values[i]) && !math.IsInf(f.Values[i], 0) {
			v[k] = f.Values[i]
		}
	}
	return v
}

// cosine over the keys both vectors have; false when there are none or
// either is zero there.
func cosine(a, b map[string]float64) (float64, bool) {
	var dot, na, nb float64
	shared := 0
	for k, x := range a {
		y, ok := b[k]
		if !ok {
			continue
		}
		shared++
		dot += x * y
		na += x * x
		nb += y * y
	}
	if shared == 0 || na == 0 || nb == 0 {
		return 0, false
	}
	return math.Max(-1, math.Min(1, dot/math.Sqrt(na*nb))), true
}

// Phenomenon words a signature's moved metrics, largest first:
// "tpot_p99 +18%, output_throughput −9%".
func (s Signature) Phenomenon() string {
	ms := append([]MetricChange(nil), s.Metrics...)
	v := s.metricVector()
	sort.SliceStable(ms, func(i, j int) bool { return math.Abs(v[ms[i].Metric]) > math.Abs(v[ms[j].Metric]) })
	var parts []string
	for _, m := range ms {
		if v[m.Metric] == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s", m.Metric, signedPct(m.Change)))
		if len(parts) == 3 {
			break
		}
	}
	if len(parts) == 0 {
		return "no metric moved"
	}
	return strings.Join(parts, ", ")
}

func signedPct(r float64) string {
	s := fmt.Sprintf("%+.0f%%", 100*r)
	return strings.Replace(s, "-", "−", 1)
}
