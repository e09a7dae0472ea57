package soak

import (
	"math"
	"slices"
)

// maxPoints bounds a fit: more samples are thinned evenly, so a two-hour
// run sampled every second costs what a thousand samples cost.
const maxPoints = 1000

// TheilSen is the median of the slopes between every pair of points with
// distinct x, and the intercept that goes with it (the median of
// y - slope·x). Points with a NaN are skipped; fewer than two usable
// points give NaN.
func TheilSen(xs, ys []float64) (slope, intercept float64) {
	var px, py []float64
	for i := range xs {
		if !math.IsNaN(xs[i]) && !math.IsNaN(ys[i]) && !math.IsInf(ys[i], 0) {
			px, py = append(px, xs[i]), append(py, ys[i])
		}
	}
	if len(px) > maxPoints {
		step := float64(len(px)) / maxPoints
		tx, ty := make([]float64, 0, maxPoints), make([]float64, 0, maxPoints)
		for k := 0; k < maxPoints; k++ {
			i := int(float64(k) * step)
			tx, ty = append(tx, px[i]), append(ty, py[i])
		}
		px, py = tx, ty
	}
	slopes := make([]float64, 0, len(px)*(len(px)-1)/2)
	for i := range px {
		for j := i + 1; j < len(px); j++ {
			if dx := px[j] - px[i]; dx != 0 {
				slopes = append(slopes, (py[j]-py[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return math.NaN(), math.NaN()
	}
	slope = median(slopes)
	res := make([]float64, len(px))
	for i := range px {
		res[i] = py[i] - slope*px[i]
	}
	return slope, median(res)
}

// median sorts x in place.
func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	slices.Sort(x)
	n := len(x)
	if n%2 == 1 {
		return x[n/2]
	}
	return (x[n/2-1] + x[n/2]) / 2
}
