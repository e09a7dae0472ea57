package agentserver

import (
	"encoding/json"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// OnResultTaken makes the server call f when an upload takes its share of
// the decoding budget (tests wait on it instead of the clock).
func OnResultTaken(f func()) (restore func()) {
	resultTaken = f
	return func() { resultTaken = nil }
}

// SplitResult is splitResult: what the results API stores of an upload,
// or why it refuses it.
func SplitResult(raw json.RawMessage, p agentapi.Plan, kind string) (store.ResultUpload, error) {
	return splitResult(raw, p, kind)
}
