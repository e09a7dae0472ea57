package web

import (
	"bytes"
	"encoding/json"
	"html/template"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
)

// LongRun is what a capacity check keeps beside its verdict document
// (which the page prints as every check's, from "report"): the sweeps'
// table and the latency–throughput curve of base and head. It holds no
// verdict of its own.
type LongRun struct {
	Markdown string `json:"markdown,omitempty"`
	// Curve is the SVG the page shows, drawn here from the stored sweeps.
	Curve template.HTML `json:"-"`
}

// longRunOf reads the sweeps from a check row's verdict document
// (dispatch's longRunDoc under "long_run"); nil when there are none.
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
	if lr.Markdown == "" && lr.Curve == "" {
		return nil
	}
	return &lr
}
