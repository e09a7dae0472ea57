package baseline

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

var update = flag.Bool("update", false, "rewrite testdata/baseline from the code")

// fixture is the committed example of the export layout.
var fixture = filepath.Join("..", "..", "..", "testdata", "baseline", "v0.26.0", "llama-8b-tp8.json")

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	ctx, st, tier := context.Background(), openStore(t), mergeTier(t)
	m := meta("v0.26.0")
	if _, _, err := Promote(ctx, st, makeRuns(5, 1, 0.01, nil), meta("v0.25.0"), tier); err != nil {
		t.Fatal(err)
	}
	m.AllowLower, m.Reason = true, "longer context"
	saved, _, err := Promote(ctx, st, makeRuns(5, 2, 0.01, map[string]float64{"p90_tpot_ms": 1.2}), m, tier)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Export(saved, &out); err != nil {
		t.Fatal(err)
	}
	s, err := Import(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got, want := s.Baseline, saved
	got.ID, got.LoadParams, got.Runs = 0, nil, nil
	want.ID, want.LoadParams, want.Runs = 0, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("imported row:\n got %+v\nwant %+v", got, want)
	}
	orig, err := Decode(saved)
	if err != nil {
		t.Fatal(err)
	}
	if s.Label != "v0.26.0" || s.Load != orig.Load || s.DatasetHash != orig.DatasetHash || s.Warmup != 500 || !sameRuns(s.Runs, orig.Runs) {
		t.Errorf("imported snapshot differs: label %q load %+v hash %q warmup %d", s.Label, s.Load, s.DatasetHash, s.Warmup)
	}
	var again bytes.Buffer
	if err := Export(s.Baseline, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), again.Bytes()) {
		t.Errorf("export → import → export changed the file:\n%s\n---\n%s", out.String(), again.String())
	}
	// compare --baseline reads an export as it is.
	runs, err := gate.ParseRuns(out.Bytes())
	if err != nil || !sameRuns(runs, orig.Runs) {
		t.Errorf("gate.ParseRuns(export) = %d runs, %v", len(runs), err)
	}
}

// The committed example imports, exports back to its own bytes, has every
// key of the layout, and is a promotable baseline.
func TestFixture(t *testing.T) {
	t.Parallel()
	if *update {
		writeFixture(t)
	}
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatalf("%v (go test ./internal/github/baseline -run TestFixture -update writes it)", err)
	}
	s, err := Import(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Export(s.Baseline, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Errorf("fixture does not round-trip:\n%s", out.String())
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "key", "repo", "commit", "image_digest", "gpu", "gpu_uuid", "driver", "load",
		"dataset_hash", "promoted_by", "reason", "allow_lower", "created_at", "runs"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("layout key %q missing", k)
		}
	}
	if s.Label != "v0.26.0" || s.Key != "llama-8b-tp8" || len(s.Runs) != 5 {
		t.Errorf("fixture = %s %s with %d runs", s.Label, s.Key, len(s.Runs))
	}
	runs, err := gate.ParseRuns(data)
	if err != nil || len(runs) != 5 {
		t.Errorf("gate.ParseRuns(fixture) = %d runs, %v", len(runs), err)
	}
	ctx, st := context.Background(), openStore(t)
	b, _, err := Promote(ctx, st, s.Runs, Meta{Repo: s.Repo, Key: s.Key, Version: s.Label, Commit: s.Commit, By: "importer"}, mergeTier(t))
	if err != nil || b.ImageDigest != s.ImageDigest || b.GPUUUID != s.GPUUUID || b.Driver != s.Driver {
		t.Errorf("promote fixture = %+v, %v", b, err)
	}
}

func TestImportRejects(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"a plain result": `{"completed": 10, "median_ttft_ms": 12}`,
		"no runs":        `{"version": "v1", "key": "k", "repo": "a/b", "runs": []}`,
		"null run":       `{"version": "v1", "key": "k", "repo": "a/b", "runs": [null]}`,
		"not JSON":       `version: v1`,
	} {
		if _, err := Import(strings.NewReader(doc)); err == nil {
			t.Errorf("%s: imported", name)
		}
	}
}

// BenchArgs reproduces the offered load with every flag spelled out.
func TestRecipe(t *testing.T) {
	t.Parallel()
	s := Snapshot{Runs: makeRuns(5, 1, 0.01, nil)}
	s.Load, s.Warmup = s.Runs[0].Perfgate.Load, 500
	s.DatasetHash, s.ImageDigest, s.GPU, s.GPUUUID, s.Commit = "abc", testImage, "NVIDIA H100", "GPU-1", testCommit
	got := strings.Join(s.BenchArgs("run-1.json"), " ")
	want := "perfgate bench --target " + TargetPlaceholder + " --endpoint /v1/completions --model meta-llama/Llama-3.1-8B-Instruct" +
		" --dataset random --input-len 1024 --output-len 128 --num-prompts 1000 --request-rate inf --burstiness 1" +
		" --max-concurrency 64 --warmup 500 --seed 0 --temperature 0 --output run-1.json"
	if got != want {
		t.Errorf("bench args\n got %s\nwant %s", got, want)
	}
	s.Load.Dataset = "sharegpt"
	if got := strings.Join(s.BenchArgs(""), " "); !strings.Contains(got, "--dataset-path DATASET_WITH_SHA256_abc") {
		t.Errorf("sharegpt recipe lacks the dataset path: %s", got)
	}
	recipe := strings.Join(s.Recipe(), "\n")
	for _, want := range []string{testImage, "GPU-1", testCommit, "repeat 5 time(s)", "perfgate bench"} {
		if !strings.Contains(recipe, want) {
			t.Errorf("recipe lacks %q:\n%s", want, recipe)
		}
	}
}

// writeFixture promotes round-valued synthetic runs into a store with a
// fixed clock and exports the result.
func writeFixture(t *testing.T) {
	t.Helper()
	ctx, st := context.Background(), openStore(t)
	runs := makeRuns(5, 26, 0.01, nil)
	for _, r := range runs {
		for k, v := range r.Metrics {
			r.Metrics[k] = round(v)
		}
		r.OutputThroughput, r.RequestThroughput = round(r.OutputThroughput), round(r.RequestThroughput)
		r.TotalInputTokens, r.TotalOutputTokens = 1024000, 128000
	}
	m := meta("v0.26.0")
	m.By, m.Reason = "release-captain", "v0.26.0 release baseline"
	b, _, err := Promote(ctx, st, runs, m, mergeTier(t))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Export(b, &out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(fixture), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixture, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func round(v float64) float64 { // four significant digits
	p := math.Pow(10, 3-math.Floor(math.Log10(v)))
	return math.Round(v*p) / p
}

func sameRuns(a, b []*result.Result) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		ja, _ := json.Marshal(a[i])
		jb, _ := json.Marshal(b[i])
		if !bytes.Equal(ja, jb) {
			return false
		}
	}
	return true
}
