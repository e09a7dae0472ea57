package gate

import (
	"math"
	"sort"
)

// The reference test: a linear mixed model over engine starts and pairs,
// the best test of a head-vs-base shift one can build on an interleaved
// PR's runs. `perfgate simulate-gate --stress` runs it beside the gate on
// exactly the runs each simulated PR produced, to show how far from the
// information limit the gate's rule is. It is not a decision path: the
// gate never calls it.
//
// Per job j (one engine session), run i on the log scale:
//
//	y = μ_j + δ·head + u_start + w_pos + e,
//
// μ_j the job's level (session shift, fixed), u_start the engine start's
// state (variance Start), w the drift — a random walk with step variance
// Drift per run in the job's order — and e the run's own noise (variance
// Run, plus HeadRun on head runs).

// mixedRun is one run as the reference test sees it.
type mixedRun struct {
	job   int     // the job (session), 0-based
	y     float64 // log value of the metric
	head  bool    // a head (candidate) run
	start int     // engine start within the job; distinct starts, distinct numbers
	pos   int     // position in the job, 1-based: the drift's clock
}

// mixedComponents are the model's variances, on the log scale.
type mixedComponents struct {
	Start   float64 // an engine start's state, shared by its runs
	Drift   float64 // the drift's step per run
	Run     float64 // a run's own noise
	HeadRun float64 // extra run noise of head runs only
}

// mixedFit is a test of δ: the estimate, its standard error and degrees
// of freedom (+Inf when the variances are known), and for an estimated
// model the components it found.
type mixedFit struct {
	d, se, df float64
	comp      mixedComponents
	boundary  bool // the start variance was estimated 0 (runs pooled)
	ok        bool
}

// p is the fit's one-sided p-value of "head is worse" (δ > 0).
func (f mixedFit) p() float64 {
	if !f.ok {
		return 1
	}
	worse, _ := oneSided(f.d, f.se, math.Min(f.df, maxDF))
	return worse
}

// byJob groups runs by job, in job order.
func byJob(runs []mixedRun) [][]mixedRun {
	m := map[int][]mixedRun{}
	var jobs []int
	for _, r := range runs {
		if _, ok := m[r.job]; !ok {
			jobs = append(jobs, r.job)
		}
		m[r.job] = append(m[r.job], r)
	}
	sort.Ints(jobs)
	out := make([][]mixedRun, len(jobs))
	for i, j := range jobs {
		out[i] = m[j]
	}
	return out
}

// oracleGLS is the generalised least squares test of δ with the true
// variance components: each job's covariance in full (shared starts, the
// drift's random walk, head-only noise), its level profiled out. Under
// normal noise no test of the same runs is more powerful: it is the
// information limit. A job with only one side carries no information on δ.
func oracleGLS(runs []mixedRun, c mixedComponents) mixedFit {
	var info, score float64
	for _, job := range byJob(runs) {
		n := len(job)
		v := make([]float64, n*n)
		for a := range job {
			for b := range job {
				x := c.Drift * float64(min(job[a].pos, job[b].pos))
				if job[a].start == job[b].start {
					x += c.Start
				}
				if a == b {
					x += c.Run
					if job[a].head {
						x += c.HeadRun
					}
				}
				v[a*n+b] = x
			}
		}
		if !cholesky(v, n) {
			return mixedFit{}
		}
		one, h, y := make([]float64, n), make([]float64, n), make([]float64, n)
		for i, r := range job {
			one[i], y[i] = 1, r.y
			if r.head {
				h[i] = 1
			}
		}
		vo, vh, vy := cholSolve(v, n, one), cholSolve(v, n, h), cholSolve(v, n, y)
		a11, a1h, ahh, a1y, ahy := dot(one, vo), dot(one, vh), dot(h, vh), dot(one, vy), dot(h, vy)
		if a11 <= 0 {
			continue
		}
		info += ahh - a1h*a1h/a11
		score += ahy - a1h*a1y/a11
	}
	if !(info > 0) {
		return mixedFit{}
	}
	return mixedFit{d: score / info, se: math.Sqrt(1 / info), df: math.Inf(1), comp: c, ok: true}
}

// cholesky factors the symmetric positive-definite n×n matrix a (row
// major) in place into its lower triangle L, a = L·Lᵀ.
func cholesky(a []float64, n int) bool {
	for j := 0; j < n; j++ {
		s := a[j*n+j]
		for k := 0; k < j; k++ {
			s -= a[j*n+k] * a[j*n+k]
		}
		if !(s > 0) {
			return false
		}
		d := math.Sqrt(s)
		a[j*n+j] = d
		for i := j + 1; i < n; i++ {
			s := a[i*n+j]
			for k := 0; k < j; k++ {
				s -= a[i*n+k] * a[j*n+k]
			}
			a[i*n+j] = s / d
		}
	}
	return true
}

// cholSolve solves L·Lᵀ·x = b with the factor cholesky left in l.
func cholSolve(l []float64, n int, b []float64) []float64 {
	x := append([]float64(nil), b...)
	for i := 0; i < n; i++ {
		for k := 0; k < i; k++ {
			x[i] -= l[i*n+k] * x[k]
		}
		x[i] /= l[i*n+i]
	}
	for i := n - 1; i >= 0; i-- {
		for k := i + 1; k < n; k++ {
			x[i] -= l[k*n+i] * x[k]
		}
		x[i] /= l[i*n+i]
	}
	return x
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// mixedStart is one engine start's summary: runs m, mean, the squares of
// its runs about that mean, its side and job.
type mixedStart struct {
	job  int
	head bool
	m    float64
	mean float64
	ss   float64
}

// remlFit is the practical best test: the same model without the drift
// term (a start's runs are neighbours; drift there counts as run noise),
// its two variances — engine start and run — estimated by restricted
// maximum likelihood from the PR's own runs, δ by generalised least
// squares at the estimate. The degrees of freedom are those Kenward–Roger
// gives in a balanced design: the starts less the fixed effects while the
// start variance is positive; every run less the fixed effects when it is
// estimated 0, the within-start spread then pooled with the starts'.
func remlFit(runs []mixedRun) mixedFit {
	starts, jobs, n := mixedStarts(runs)
	if len(starts) == 0 {
		return mixedFit{}
	}
	p := float64(jobs + 1)
	if float64(n)-p < 1 {
		return mixedFit{}
	}
	ssw := 0.0
	for _, s := range starts {
		ssw += s.ss
	}
	// The REML log-likelihood, σ² profiled out, in γ = Start/Run.
	loglik := func(g float64) (float64, remlAt) {
		at := remlSolve(starts, g)
		if !at.ok {
			return math.Inf(-1), at
		}
		s2 := (ssw + at.rss) / (float64(n) - p)
		if !(s2 > 0) {
			return math.Inf(-1), at
		}
		at.s2 = s2
		ll := (float64(n)-p)*math.Log(s2) + at.logDet
		for _, s := range starts {
			ll += math.Log1p(s.m * g)
		}
		return -ll / 2, at
	}
	bestLL, best := loglik(0)
	bestG := 0.0
	// Golden section over log γ in [1e-4, 1e3]: the profile is unimodal in
	// practice; the boundary γ = 0 is checked apart.
	lo, hi := math.Log(1e-4), math.Log(1e3)
	phi := (math.Sqrt(5) - 1) / 2
	x1, x2 := hi-phi*(hi-lo), lo+phi*(hi-lo)
	f1, a1 := loglik(math.Exp(x1))
	f2, a2 := loglik(math.Exp(x2))
	for i := 0; i < 60 && hi-lo > 1e-4; i++ {
		if f1 >= f2 {
			hi, x2, f2, a2 = x2, x1, f1, a1
			x1 = hi - phi*(hi-lo)
			f1, a1 = loglik(math.Exp(x1))
		} else {
			lo, x1, f1, a1 = x1, x2, f2, a2
			x2 = lo + phi*(hi-lo)
			f2, a2 = loglik(math.Exp(x2))
		}
	}
	g, fg, ag := math.Exp(x1), f1, a1
	if f2 > f1 {
		g, fg, ag = math.Exp(x2), f2, a2
	}
	boundary := true
	if fg > bestLL && g > 1.5e-4 {
		bestLL, best, bestG, boundary = fg, ag, g, false
	}
	if !best.ok {
		return mixedFit{}
	}
	df := float64(n) - p
	if !boundary {
		df = math.Max(float64(len(starts))-p, 1)
	}
	return mixedFit{d: best.d, se: math.Sqrt(best.s2 / best.info), df: df,
		comp: mixedComponents{Start: bestG * best.s2, Run: best.s2}, boundary: boundary, ok: true}
}

// mixedStarts summarises the runs by engine start; it counts the jobs
// with both sides (the others say nothing of δ and are left out) and
// their runs.
func mixedStarts(runs []mixedRun) ([]mixedStart, int, int) {
	type key struct{ job, start int }
	idx := map[key]int{}
	var out []mixedStart
	var ys [][]float64
	sides := map[int][2]bool{}
	for _, r := range runs {
		k := key{r.job, r.start}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, mixedStart{job: r.job, head: r.head})
			ys = append(ys, nil)
		}
		ys[i] = append(ys[i], r.y)
		s := sides[r.job]
		if r.head {
			s[1] = true
		} else {
			s[0] = true
		}
		sides[r.job] = s
	}
	var kept []mixedStart
	jobs, n := map[int]bool{}, 0
	for i, s := range out {
		if sd := sides[s.job]; !sd[0] || !sd[1] {
			continue
		}
		m := float64(len(ys[i]))
		mean := 0.0
		for _, y := range ys[i] {
			mean += y
		}
		mean /= m
		ss := 0.0
		for _, y := range ys[i] {
			ss += (y - mean) * (y - mean)
		}
		s.m, s.mean, s.ss = m, mean, ss
		kept = append(kept, s)
		jobs[s.job] = true
		n += len(ys[i])
	}
	return kept, len(jobs), n
}

// remlAt is the weighted least squares of the start means at one γ.
type remlAt struct {
	d      float64 // δ
	info   float64 // Σ_j c_j: δ's information per unit σ²
	rss    float64 // weighted residual squares of the start means
	logDet float64 // log |Xᵀ H⁻¹ X|
	s2     float64 // σ² (the run variance) at this γ
	ok     bool
}

// remlSolve fits the start means on job levels and δ, start s weighted
// m_s/(1+m_s·γ) (its mean's precision per unit run variance).
func remlSolve(starts []mixedStart, g float64) remlAt {
	type side struct{ w, wy float64 }
	per := map[int]*[2]side{}
	var jobs []int
	for _, s := range starts {
		w := s.m / (1 + s.m*g)
		p, ok := per[s.job]
		if !ok {
			p = &[2]side{}
			per[s.job] = p
			jobs = append(jobs, s.job)
		}
		k := 0
		if s.head {
			k = 1
		}
		p[k].w += w
		p[k].wy += w * s.mean
	}
	sort.Ints(jobs)
	var at remlAt
	num := 0.0
	for _, j := range jobs {
		p := per[j]
		if p[0].w <= 0 || p[1].w <= 0 {
			return remlAt{}
		}
		c := 1 / (1/p[0].w + 1/p[1].w)
		at.info += c
		num += c * (p[1].wy/p[1].w - p[0].wy/p[0].w)
		at.logDet += math.Log(p[0].w + p[1].w)
	}
	if !(at.info > 0) {
		return remlAt{}
	}
	at.d = num / at.info
	at.logDet += math.Log(at.info)
	mu := map[int]float64{}
	for _, j := range jobs {
		p := per[j]
		mu[j] = (p[0].wy + p[1].wy - at.d*p[1].w) / (p[0].w + p[1].w)
	}
	for _, s := range starts {
		w := s.m / (1 + s.m*g)
		fit := mu[s.job]
		if s.head {
			fit += at.d
		}
		at.rss += w * (s.mean - fit) * (s.mean - fit)
	}
	at.ok = true
	return at
}
