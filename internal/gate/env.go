package gate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/result"
)

// envField is one property two runs must share to be compared.
type envField struct {
	name string
	get  func(*result.Result) string
}

// perfgateFields are checked when every run carries perfgate's section:
// the card, its software, the engine, the prompts and the offered load.
var perfgateFields = []envField{
	{"gpu_name", func(r *result.Result) string { return r.Perfgate.Environment.GPUName }},
	{"gpu_uuid", func(r *result.Result) string { return r.Perfgate.Environment.GPUUUID }},
	{"gpu_count", func(r *result.Result) string { return strconv.Itoa(r.Perfgate.Environment.GPUCount) }},
	{"mig_mode", func(r *result.Result) string { return r.Perfgate.Environment.MIGMode }},
	{"power_limit_w", func(r *result.Result) string { return ftoa(r.Perfgate.Environment.PowerLimitW) }},
	{"driver_version", func(r *result.Result) string { return r.Perfgate.Environment.Driver }},
	{"cuda_version", func(r *result.Result) string { return r.Perfgate.Environment.CUDA }},
	{"engine_image", func(r *result.Result) string { return r.Perfgate.Environment.EngineImage }},
	{"sim", func(r *result.Result) string { return strconv.FormatBool(r.Perfgate.Environment.Sim) }},
	{"dataset_hash", func(r *result.Result) string { return r.Perfgate.DatasetHash }},
	{"load.endpoint", func(r *result.Result) string { return r.Perfgate.Load.Endpoint }},
	{"load.model", func(r *result.Result) string { return r.Perfgate.Load.Model }},
	{"load.dataset", func(r *result.Result) string { return r.Perfgate.Load.Dataset }},
	{"load.num_prompts", func(r *result.Result) string { return strconv.Itoa(r.Perfgate.Load.NumPrompts) }},
	{"load.input_len", func(r *result.Result) string { return strconv.Itoa(r.Perfgate.Load.InputLen) }},
	{"load.output_len", func(r *result.Result) string { return strconv.Itoa(r.Perfgate.Load.OutputLen) }},
	{"load.request_rate", func(r *result.Result) string { return r.Perfgate.Load.RequestRate.String() }},
	{"load.burstiness", func(r *result.Result) string { return ftoa(r.Perfgate.Load.Burstiness) }},
	{"load.max_concurrency", func(r *result.Result) string { return strconv.Itoa(r.Perfgate.Load.MaxConcurrency) }},
	{"load.seed", func(r *result.Result) string { return strconv.FormatInt(r.Perfgate.Load.Seed, 10) }},
	{"load.temperature", func(r *result.Result) string { return ftoa(r.Perfgate.Load.Temperature) }},
}

// vllmFields are what a plain vLLM file says about its load.
var vllmFields = []envField{
	{"model_id", func(r *result.Result) string { return r.ModelID }},
	{"num_prompts", func(r *result.Result) string { return strconv.Itoa(r.NumPrompts) }},
	{"request_rate", func(r *result.Result) string { return r.RequestRate.String() }},
	{"burstiness", func(r *result.Result) string { return ftoa(r.Burstiness) }},
	{"max_concurrency", func(r *result.Result) string {
		if r.MaxConcurrency == nil {
			return "none"
		}
		return strconv.Itoa(*r.MaxConcurrency)
	}},
}

// checkEnvironment lists the fields on which the two run sets differ, or
// on which either set disagrees with itself, and a note when the runs are
// plain vLLM files whose environment is unknown.
func checkEnvironment(base, cand []*result.Result, fields []envField) ([]Mismatch, []string) {
	var notes []string
	if plainB, plainC := countPlain(base), countPlain(cand); plainB+plainC > 0 {
		fields = vllmFields
		notes = append(notes, fmt.Sprintf("environment unknown: %d baseline and %d candidate run(s) are plain vLLM results without perfgate's section; GPU, driver, CUDA, image and dataset were not checked", plainB, plainC))
	}
	var out []Mismatch
	for _, f := range fields {
		b, c := distinct(base, f.get), distinct(cand, f.get)
		if len(b) == 1 && len(c) == 1 && b[0] == c[0] {
			continue
		}
		out = append(out, Mismatch{Field: f.name, Baseline: strings.Join(b, ", "), Candidate: strings.Join(c, ", ")})
	}
	return out, notes
}

func countPlain(rs []*result.Result) int {
	n := 0
	for _, r := range rs {
		if r.Perfgate == nil {
			n++
		}
	}
	return n
}

func distinct(rs []*result.Result, get func(*result.Result) string) []string {
	set := map[string]bool{}
	for _, r := range rs {
		set[get(r)] = true
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
