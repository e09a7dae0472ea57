package stats

import "math"

// TCDF is Student's t distribution function with df degrees of freedom.
func TCDF(t, df float64) float64 {
	if math.IsInf(t, 1) {
		return 1
	}
	if math.IsInf(t, -1) {
		return 0
	}
	x := df / (df + t*t)
	tail := 0.5 * RegIncBeta(df/2, 0.5, x)
	if t > 0 {
		return 1 - tail
	}
	return tail
}

// TQuantile is the p-quantile of Student's t with df degrees of freedom
// (df may be fractional, as Satterthwaite's are): safeguarded Newton steps
// on the upper tail, from the normal quantile, inside a bracket that
// bisection falls back to. Working on the tail keeps the far quantiles
// (p = 1 − 10⁻⁶) accurate.
func TQuantile(p, df float64) float64 {
	switch {
	case math.IsNaN(p) || math.IsNaN(df) || df <= 0:
		return math.NaN()
	case p <= 0:
		return math.Inf(-1)
	case p >= 1:
		return math.Inf(1)
	case p == 0.5:
		return 0
	case p < 0.5:
		return -TQuantile(1-p, df)
	}
	q := 1 - p // the upper tail to hit
	tail := func(t float64) float64 { return 0.5 * RegIncBeta(df/2, 0.5, df/(df+t*t)) }
	lo, hi := 0.0, 1.0
	for tail(hi) > q {
		lo, hi = hi, hi*2
		if hi > 1e300 {
			return math.Inf(1)
		}
	}
	logNorm := lgamma((df+1)/2) - lgamma(df/2) - 0.5*math.Log(df*math.Pi)
	x := math.Sqrt2 * math.Erfinv(2*p-1) // the normal quantile: close for large df
	if !(x > lo && x < hi) {
		x = (lo + hi) / 2
	}
	for i := 0; i < 200; i++ {
		f := tail(x) - q
		if f > 0 {
			lo = x
		} else {
			hi = x
		}
		if math.Abs(f) <= 1e-13*q || hi-lo <= 1e-13*hi {
			break
		}
		pdf := math.Exp(logNorm - (df+1)/2*math.Log1p(x*x/df))
		next := x + f/pdf // tail falls with slope −pdf
		if !(next > lo && next < hi) || pdf == 0 {
			next = (lo + hi) / 2
		}
		x = next
	}
	return x
}

func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}

// NormCDF is the standard normal distribution function.
func NormCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// RegIncBeta is the regularized incomplete beta function I_x(a, b).
func RegIncBeta(a, b, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	la, _ := math.Lgamma(a + b)
	lb, _ := math.Lgamma(a)
	lc, _ := math.Lgamma(b)
	front := math.Exp(la - lb - lc + a*math.Log(x) + b*math.Log(1-x))
	// The continued fraction converges fast on this side; use symmetry
	// for the other.
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

// betaCF evaluates the incomplete beta continued fraction (modified Lentz).
func betaCF(a, b, x float64) float64 {
	const tiny = 1e-300
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1-qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		aa := fm * (b - fm) * x / ((qam + 2*fm) * (a + 2*fm))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + 2*fm) * (qap + 2*fm))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-14 {
			break
		}
	}
	return h
}
