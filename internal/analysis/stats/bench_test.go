package stats

import "testing"

// BenchmarkTQuantile times one quantile at a fractional df, the gate's
// common case (Satterthwaite's df differ on every comparison).
func BenchmarkTQuantile(b *testing.B) {
	df := 7.3
	for b.Loop() {
		df += 1e-9
		TQuantile(0.99975, df)
	}
}
