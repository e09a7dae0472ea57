package baseline

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Document is the export layout (baselines/<version>/<key>.json). Its
// "runs" key is what gate.ParseRuns reads, so `perfgate compare
// --baseline` takes an export file as it is.
type Document struct {
	Version     string           `json:"version"` // the release label, e.g. "v0.26.0"
	Number      int              `json:"number"`  // the store's sequence number for (repo, key)
	Key         string           `json:"key"`
	Repo        string           `json:"repo"`
	Commit      string           `json:"commit"`
	ImageDigest string           `json:"image_digest"`
	GPU         string           `json:"gpu"`
	GPUUUID     string           `json:"gpu_uuid"`
	Driver      string           `json:"driver"`
	Load        result.Load      `json:"load"`
	DatasetHash string           `json:"dataset_hash"`
	Warmup      int              `json:"warmup_requests,omitempty"`
	PromotedBy  string           `json:"promoted_by"`
	Reason      string           `json:"reason"`
	AllowLower  bool             `json:"allow_lower"`
	CreatedAt   time.Time        `json:"created_at"`
	Runs        []*result.Result `json:"runs"`
}

// Export writes b in the export layout, indented, keys in a fixed order,
// so an exported file diffs cleanly and an import exports back to the same
// bytes.
func Export(b store.Baseline, w io.Writer) error {
	s, err := Decode(b)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	doc := Document{
		Version: s.Label, Number: b.Version, Key: b.Key, Repo: b.Repo, Commit: b.Commit,
		ImageDigest: b.ImageDigest, GPU: b.GPU, GPUUUID: b.GPUUUID, Driver: b.Driver,
		Load: s.Load, DatasetHash: s.DatasetHash, Warmup: s.Warmup,
		PromotedBy: b.PromotedBy, Reason: b.Reason, AllowLower: b.AllowLower,
		CreatedAt: b.CreatedAt.UTC(), Runs: s.Runs,
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("export %s %s #%d: %w", b.Repo, b.Key, b.Version, err)
	}
	if _, err := w.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("export %s %s #%d: %w", b.Repo, b.Key, b.Version, err)
	}
	return nil
}

// Import reads an export file. The snapshot's Baseline has no ID; storing
// it goes through Promote, which applies both rules again.
func Import(r io.Reader) (Snapshot, error) {
	var doc Document
	dec := json.NewDecoder(r)
	if err := dec.Decode(&doc); err != nil {
		return Snapshot{}, fmt.Errorf("import baseline: %w", err)
	}
	if doc.Key == "" || doc.Repo == "" || doc.Version == "" {
		return Snapshot{}, fmt.Errorf("import baseline: not an export file: it needs \"repo\", \"key\" and \"version\"")
	}
	if len(doc.Runs) == 0 {
		return Snapshot{}, fmt.Errorf("import baseline %s %s %s: no runs", doc.Repo, doc.Key, doc.Version)
	}
	for i, run := range doc.Runs {
		if run == nil {
			return Snapshot{}, fmt.Errorf("import baseline %s %s %s: run %d is null", doc.Repo, doc.Key, doc.Version, i+1)
		}
	}
	lp, err := json.Marshal(loadParams{Load: doc.Load, DatasetHash: doc.DatasetHash, Warmup: doc.Warmup, Label: doc.Version})
	if err != nil {
		return Snapshot{}, fmt.Errorf("import baseline: %w", err)
	}
	runs, err := json.Marshal(doc.Runs)
	if err != nil {
		return Snapshot{}, fmt.Errorf("import baseline: %w", err)
	}
	return Snapshot{
		Baseline: store.Baseline{
			Repo: doc.Repo, Key: doc.Key, Version: doc.Number, Commit: doc.Commit,
			ImageDigest: doc.ImageDigest, GPU: doc.GPU, GPUUUID: doc.GPUUUID, Driver: doc.Driver,
			LoadParams: lp, Runs: runs,
			PromotedBy: doc.PromotedBy, Reason: doc.Reason, AllowLower: doc.AllowLower, CreatedAt: doc.CreatedAt,
		},
		Label: doc.Version, Load: doc.Load, DatasetHash: doc.DatasetHash, Warmup: doc.Warmup, Runs: doc.Runs,
	}, nil
}
