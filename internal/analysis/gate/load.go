package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// LoadRuns reads the runs in a file: one result (perfgate's or a plain
// `vllm bench serve --save-result` file), several results one per line
// (--append-result), a JSON array of results, or a baseline export {"version": …, "commit": …, "runs": [<result>, …],
// "metadata": {…}}.
func LoadRuns(path string) ([]*result.Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	runs, err := ParseRuns(data)
	if err != nil {
		return nil, fmt.Errorf("parse runs %s: %w", path, err)
	}
	return runs, nil
}

// ParseRuns is LoadRuns on bytes.
func ParseRuns(data []byte) ([]*result.Result, error) {
	data = bytes.TrimSpace(data)
	var raws []json.RawMessage
	switch {
	case len(data) > 0 && data[0] == '[':
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, err
		}
	default:
		var probe struct {
			Runs    []json.RawMessage `json:"runs"`
			Version string            `json:"version"`
		}
		if err := json.Unmarshal(data, &probe); err != nil {
			// Several objects one after another (--append-result's JSON
			// Lines), or not JSON: ParseAll says which object is broken.
			return result.ParseAll(data)
		}
		if probe.Runs != nil {
			raws = probe.Runs
		} else {
			raws = []json.RawMessage{data}
		}
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("no runs in the file")
	}
	out := make([]*result.Result, 0, len(raws))
	for i, raw := range raws {
		r, err := result.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}
