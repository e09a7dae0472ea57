package kb

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// A match is evidence only where the two regressions can be told apart
// from the causes they are not. Gated metrics alone cannot do that: with
// TPOT gated, a scheduler change, a uniform slowdown and a costlier batch
// all read "TPOT up" and sit within 0.01 of each other. The scheduler
// profile can (a uniform slowdown leaves prefill interruptions where they
// were), so a record that has a profile fingerprint is only matched by a
// regression that has one too, and then both parts must agree.

// Minimum similarities (cosines) each part must reach for a match.
const (
	// MinProfileSimilarity: the two profile diffs point the same way. Two
	// profiles of one scheduler change score 0.9 and more; a scheduler
	// change against a uniform slowdown or a batch-cost rise under 0.3
	// (testdata and the profile fixtures).
	MinProfileSimilarity = 0.8
	// MinMetricSimilarity: the gated metrics moved the same way. Lower
	// than the profile's: the metrics a tier gates are few and noisy,
	// and when a profile is compared it carries the cause.
	MinMetricSimilarity = 0.6
	// MinMetricOnlySimilarity is the bar when neither side has a profile:
	// the metric shape is all the evidence there is.
	MinMetricOnlySimilarity = 0.9
)

// Evidence is what a comparison rested on.
type Evidence string

const (
	// EvidenceProfile: the profile fingerprints and the metric shape.
	EvidenceProfile Evidence = "profile and metrics"
	// EvidenceMetrics: the metric shape only (the record has no profile).
	EvidenceMetrics Evidence = "metrics only"
)

// Strength words how close a match is.
type Strength string

const (
	Strong   Strength = "strong"
	Moderate Strength = "moderate"
	Weak     Strength = "weak" // metrics only: a hint, not a diagnosis
)

// Match is one record compared with a regression.
type Match struct {
	Record   Record
	Distance float64 // 1 − the mean of the similarities compared
	// MetricSimilarity and ProfileSimilarity are the cosines of each part;
	// NaN when the part was not compared.
	MetricSimilarity, ProfileSimilarity float64
	Evidence                            Evidence
	Strength                            Strength
	// Agreeing names the components that agree most, largest share of the
	// similarity first: "prefill_interruption_rate ↑", "tpot_p90 ↑".
	Agreeing []string
}

// Verdict is the knowledge base's answer for one regression.
type Verdict struct {
	// Match is the best record that matched; ok false when none did.
	Match Match
	OK    bool
	// NeedsProfile lists records (best first) that the metric shape does
	// not rule out but that can only be confirmed or ruled out by a
	// profile of the regression, because they were recorded with one.
	// A caller that has a profile queued waits for it; one that has none
	// says that `/perf profile` would tell.
	NeedsProfile []Match
}

// Judge compares sig with every record. A record with a profile matches
// only when sig has a profile too and both the profile and the metric
// shape agree (MinProfileSimilarity, MinMetricSimilarity); a record
// without one matches on the metric shape alone, at MinMetricOnlySimilarity
// and never better than Weak. The best match is the smallest distance,
// profile evidence before metrics only, the newest on a tie.
func Judge(records []Record, sig Signature) Verdict {
	var v Verdict
	for _, r := range records {
		m, matched, needsProfile := compare(r, sig)
		switch {
		case matched && (!v.OK || better(m, v.Match)):
			v.Match, v.OK = m, true
		case needsProfile:
			v.NeedsProfile = append(v.NeedsProfile, m)
		}
	}
	sort.SliceStable(v.NeedsProfile, func(i, j int) bool { return v.NeedsProfile[i].Distance < v.NeedsProfile[j].Distance })
	return v
}

func better(a, b Match) bool {
	if (a.Evidence == EvidenceProfile) != (b.Evidence == EvidenceProfile) {
		return a.Evidence == EvidenceProfile
	}
	if a.Distance != b.Distance {
		return a.Distance < b.Distance
	}
	return a.Record.CreatedAt.After(b.Record.CreatedAt)
}

// compare is one record against sig: the match (distance, parts,
// strength), whether it matched, and whether only a profile can tell.
func compare(r Record, sig Signature) (m Match, matched, needsProfile bool) {
	m = Match{Record: r, MetricSimilarity: math.NaN(), ProfileSimilarity: math.NaN(), Distance: math.Inf(1)}
	mv, rv := sig.metricVector(), r.Signature.metricVector()
	cm, okM := cosine(mv, rv)
	if okM {
		m.MetricSimilarity = cm
	}
	if r.Signature.Profile != nil {
		if sig.Profile == nil {
			// Nothing but the profile can confirm it; the metric shape can
			// still rule it out.
			if okM && cm >= MinMetricSimilarity {
				m.Distance = 1 - cm
				m.Evidence = EvidenceProfile
				return m, false, true
			}
			return m, false, false
		}
		pv, rp := vector(sig.Profile), vector(r.Signature.Profile)
		cp, okP := cosine(pv, rp)
		if !okP {
			return m, false, false
		}
		m.ProfileSimilarity, m.Evidence = cp, EvidenceProfile
		if !okM || cp < MinProfileSimilarity || cm < MinMetricSimilarity {
			m.Distance = 1 - (cp+cm)/2
			return m, false, false
		}
		m.Distance = 1 - (cp+cm)/2
		m.Strength = Moderate
		if cp >= 0.9 && cm >= 0.9 {
			m.Strength = Strong
		}
		m.Agreeing = append(agreeing(pv, rp, 2, "↑", "↓"), agreeing(mv, rv, 2, "worse", "better")...)
		return m, true, false
	}
	m.Evidence = EvidenceMetrics
	if !okM {
		return m, false, false
	}
	m.Distance = 1 - cm
	if cm < MinMetricOnlySimilarity {
		return m, false, false
	}
	m.Strength = Weak
	m.Agreeing = agreeing(mv, rv, 3, "worse", "better")
	return m, true, false
}

// agreeing names the n shared components that add most to the cosine of a
// and b, with the direction they moved in: "prefill_interruption_rate ↑",
// "tpot_p90 worse".
func agreeing(a, b map[string]float64, n int, up, down string) []string {
	type part struct {
		key string
		w   float64
		up  bool
	}
	var parts []part
	for k, x := range a {
		y, ok := b[k]
		if !ok || x*y <= 0 {
			continue
		}
		parts = append(parts, part{k, x * y, x > 0})
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].w != parts[j].w {
			return parts[i].w > parts[j].w
		}
		return parts[i].key < parts[j].key
	})
	var out []string
	for i, p := range parts {
		if i == n {
			break
		}
		dir := down
		if p.up {
			dir = up
		}
		out = append(out, p.key+" "+dir)
	}
	return out
}

// Words is the match's evidence for a reader: "strong (profile and
// metrics: profile similarity 0.97, metric shape 0.99); agreeing:
// prefill_interruption_rate ↑, mixed_time_share ↑, tpot_p90 worse".
func (m Match) Words() string {
	var parts []string
	if !math.IsNaN(m.ProfileSimilarity) {
		parts = append(parts, fmt.Sprintf("profile similarity %.2f", m.ProfileSimilarity))
	}
	if !math.IsNaN(m.MetricSimilarity) {
		parts = append(parts, fmt.Sprintf("metric shape %.2f", m.MetricSimilarity))
	}
	s := string(m.Strength)
	if s == "" {
		s = "no match"
	}
	s += " (" + string(m.Evidence)
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	s += ")"
	if len(m.Agreeing) > 0 {
		s += "; agreeing: " + strings.Join(m.Agreeing, ", ")
	}
	return s
}
