package bisect

import (
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// RunValues is each run's value of metric (a config name such as
// "tpot_p90"), as the gate reads it: what Observe takes from a finished
// job's results.
func RunValues(runs []*result.Result, metric string) ([]float64, error) {
	out := make([]float64, 0, len(runs))
	for i, r := range runs {
		v, ok := gate.MedianOf([]*result.Result{r}, metric)
		if !ok || !(v > 0) {
			return nil, fmt.Errorf("run %d of %d has no positive %s", i+1, len(runs), metric)
		}
		out = append(out, v)
	}
	return out, nil
}
