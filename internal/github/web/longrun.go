package web

import (
	"bytes"
	"encoding/json"
	"html/template"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
)

// LongRun is a capacity or soak check's verdict as its row keeps it: the
// headline, the check's markdown table and, for capacity, the knees and
// the latency–throughput curve of base and head.
type LongRun struct {
	Headline string               `json:"headline"`
	Markdown string               `json:"markdown"`
	Capacity *capacity.Comparison `json:"capacity,omitempty"`
	SoakPass *bool                `json:"soak_pass,omitempty"`
	// Curve is the SVG the page shows, drawn here from the stored sweeps.
	Curve template.HTML `json:"-"`
}

// longRunOf reads the long-run verdict from a check row's verdict
// document (dispatch's longRunDoc under "long_run"); nil when there is
// none.
func longRunOf(verdict []byte) *LongRun {
	var doc struct {
		LongRun *struct {
			LongRun
			BaseSweep *capacity.Sweep `json:"base_sweep"`
			HeadSweep *capacity.Sweep `json:"head_sweep"`
		} `json:"long_run"`
	}
	if len(verdict) == 0 || json.Unmarshal(verdict, &doc) != nil || doc.LongRun == nil {
		return nil
	}
	lr := doc.LongRun.LongRun
	if b, h := doc.LongRun.BaseSweep, doc.LongRun.HeadSweep; h != nil {
		var svg bytes.Buffer
		if capacity.SVG(&svg, b, h) == nil {
			// capacity.SVG writes numbers and its own fixed labels only:
			// nothing stored as text reaches the markup.
			lr.Curve = template.HTML(svg.String()) //nolint:gosec // drawn from numbers by capacity.SVG, no stored text
		}
	}
	return &lr
}
