package web

import (
	"encoding/json"

	"github.com/perfgate/perfgate/internal/analysis/gate"
)

// storedReport is the gate's report a check run's verdict document keeps;
// nil when it has none.
func storedReport(raw json.RawMessage) *gate.Report {
	if len(raw) == 0 {
		return nil
	}
	var doc struct {
		Report *gate.Report `json:"report"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return nil
	}
	return doc.Report
}
