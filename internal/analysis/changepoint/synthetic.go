package changepoint

import (
	"math/rand/v2"
)

// Synthetic describes a family of generated series for measuring the
// detector: Length points of Gaussian noise (relative standard deviation
// Noise around 1) with one step of relative size Step at a position drawn
// uniformly from the middle half, or no step when Step is 0.
type Synthetic struct {
	Series int
	Length int
	Step   float64
	Noise  float64
	Seed   uint64
	// Tolerance is how far (in points) a detected change point may be from
	// the planted one and still count as found. Default 2.
	Tolerance int
}

// Score is how the detector did on a Synthetic family.
type Score struct {
	Series int `json:"series"`
	// Found counts series whose planted step was detected within the
	// tolerance; Recall is Found/Series (0 when nothing was planted).
	Found  int     `json:"found"`
	Recall float64 `json:"recall"`
	// FalsePositives counts detected change points that match no planted
	// step, over all series; FalsePerSeries is that per series.
	FalsePositives int     `json:"false_positives"`
	FalsePerSeries float64 `json:"false_per_series"`
	// SeriesWithFalse counts series with at least one false positive.
	SeriesWithFalse int `json:"series_with_false"`
}

// Evaluate generates the family and runs Detect on every series.
func Evaluate(s Synthetic, o Options) Score {
	if s.Tolerance <= 0 {
		s.Tolerance = 2
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x9e3779b97f4a7c15))
	var sc Score
	sc.Series = s.Series
	for i := 0; i < s.Series; i++ {
		z, at := s.generate(rng)
		found, falses := false, 0
		for _, cp := range Detect(z, o) {
			if at >= 0 && !found && abs(cp.Index-at) <= s.Tolerance {
				found = true
				continue
			}
			falses++
		}
		if found {
			sc.Found++
		}
		sc.FalsePositives += falses
		if falses > 0 {
			sc.SeriesWithFalse++
		}
	}
	if s.Step != 0 && s.Series > 0 {
		sc.Recall = float64(sc.Found) / float64(s.Series)
	}
	if s.Series > 0 {
		sc.FalsePerSeries = float64(sc.FalsePositives) / float64(s.Series)
	}
	return sc
}

// generate draws one series and the index of its step (-1 for none).
func (s Synthetic) generate(rng *rand.Rand) ([]float64, int) {
	z := make([]float64, s.Length)
	at := -1
	if s.Step != 0 {
		at = s.Length/4 + rng.IntN(s.Length/2+1)
	}
	for i := range z {
		level := 1.0
		if at >= 0 && i >= at {
			level += s.Step
		}
		z[i] = 100 * level * (1 + s.Noise*rng.NormFloat64())
	}
	return z, at
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
