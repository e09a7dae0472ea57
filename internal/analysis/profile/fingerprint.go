package profile

import (
	"errors"
	"fmt"
	"math"
)

// maxLogRatio clips a fingerprint component, so one metric that went from
// nothing to something cannot drown the others.
const maxLogRatio = 3

// Fingerprint is a diff as a vector: for each fingerprint metric, in a fixed
// order, the log ratio head/base (smoothed by the metric's floor and clipped
// to ±3).
// Two regressions with the same cause point the same way, so a knowledge
// base can match a new diff to recorded ones by distance.
type Fingerprint struct {
	Keys   []string  `json:"keys"`
	Values []float64 `json:"values"`
}

// Fingerprint returns the diff's vector.
func (d Diff) Fingerprint() Fingerprint {
	var f Fingerprint
	for _, m := range metrics {
		if !m.fingerprint {
			continue
		}
		b, h := math.Max(m.get(d.Base), 0), math.Max(m.get(d.Head), 0)
		v := math.Log((h + m.floor) / (b + m.floor))
		f.Keys = append(f.Keys, m.key)
		f.Values = append(f.Values, math.Max(-maxLogRatio, math.Min(maxLogRatio, v)))
	}
	return f
}

// Distance is the Euclidean distance between two fingerprints of the same
// metrics; an error when they were made with different metric lists (a
// fingerprint recorded by an older perfgate).
func (f Fingerprint) Distance(g Fingerprint) (float64, error) {
	if len(f.Keys) != len(g.Keys) || len(f.Values) != len(f.Keys) || len(g.Values) != len(g.Keys) {
		return 0, errors.New("fingerprints have different lengths: compare fingerprints made by the same perfgate version")
	}
	var sum float64
	for i := range f.Keys {
		if f.Keys[i] != g.Keys[i] {
			return 0, fmt.Errorf("fingerprint component %d is %q in one and %q in the other", i, f.Keys[i], g.Keys[i])
		}
		d := f.Values[i] - g.Values[i]
		sum += d * d
	}
	return math.Sqrt(sum), nil
}
