package gate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// envField is one property two runs must share to be compared.
type envField struct {
	name string
	get  func(*result.Result) string
}

// perSeed are the fields that follow the run's load seed (the prompts a
// seed draws): a side may hold several values, one per seed, and runs are
// compared seed by seed. Repeats are often run with seeds 1, 2, 3…, which
// changes the prompts but not the engine.
var perSeed = map[string]bool{"dataset_hash": true}

// seedOf is the run's load seed, the key of the perSeed fields.
func seedOf(r *result.Result) string { return strconv.FormatInt(r.Perfgate.Load.Seed, 10) }

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
	// load.seed is not an identity: it picks the prompts and the arrival
	// times, a per-run sample of the same load (dataset_hash is checked
	// per seed).
	{"load.temperature", func(r *result.Result) string { return ftoa(r.Perfgate.Load.Temperature) }},
	{"load.traffic", func(r *result.Result) string { return r.Perfgate.Traffic.Signature() }},
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
// plain vLLM files whose environment is unknown. A perSeed field is
// compared within each seed; its Mismatch names the seed.
func checkEnvironment(base, cand []*result.Result, fields []envField) ([]Mismatch, []string) {
	var notes []string
	if plainB, plainC := countPlain(base), countPlain(cand); plainB+plainC > 0 {
		fields = vllmFields
		notes = append(notes, fmt.Sprintf("environment unknown: %d baseline and %d candidate run(s) are plain vLLM results without perfgate's section; GPU, driver, CUDA, image and dataset were not checked", plainB, plainC))
	}
	var out []Mismatch
	for _, f := range fields {
		if perSeed[f.name] {
			mm, note := checkPerSeed(base, cand, f)
			out = append(out, mm...)
			if note != "" {
				notes = append(notes, note)
			}
			continue
		}
		b, c := distinct(base, f.get), distinct(cand, f.get)
		if len(b) == 1 && len(c) == 1 && b[0] == c[0] {
			continue
		}
		out = append(out, Mismatch{Field: f.name, Baseline: strings.Join(b, ", "), Candidate: strings.Join(c, ", ")})
	}
	return out, notes
}

// checkPerSeed compares f seed by seed: within a side one seed must give
// one value, and a seed run on both sides must give the same value there.
// A seed run on one side only cannot be checked; the note says so.
func checkPerSeed(base, cand []*result.Result, f envField) ([]Mismatch, string) {
	b, c := bySeed(base), bySeed(cand)
	seeds := make([]string, 0, len(b)+len(c))
	for s := range b {
		seeds = append(seeds, s)
	}
	for s := range c {
		if _, ok := b[s]; !ok {
			seeds = append(seeds, s)
		}
	}
	sort.Slice(seeds, func(i, j int) bool { return seedLess(seeds[i], seeds[j]) })
	var out []Mismatch
	var oneSide []string
	for _, s := range seeds {
		bv, cv := distinct(b[s], f.get), distinct(c[s], f.get)
		switch {
		case len(bv) == 0 || len(cv) == 0:
			if len(bv) > 1 || len(cv) > 1 {
				out = append(out, Mismatch{Field: f.name + " (seed " + s + ")", Baseline: strings.Join(bv, ", "), Candidate: strings.Join(cv, ", ")})
			}
			oneSide = append(oneSide, s)
		case len(bv) == 1 && len(cv) == 1 && bv[0] == cv[0]:
		default:
			out = append(out, Mismatch{Field: f.name + " (seed " + s + ")", Baseline: strings.Join(bv, ", "), Candidate: strings.Join(cv, ", ")})
		}
	}
	note := ""
	if len(oneSide) > 0 {
		note = fmt.Sprintf("%s not compared for seed(s) %s: run on one side only; the runs of the other seeds match", f.name, strings.Join(oneSide, ", "))
		if len(oneSide) == len(seeds) {
			note = fmt.Sprintf("%s not compared: the two sides share no load seed, so their prompts differ by design; pin --seed (or run the same seeds on both sides) to check the dataset", f.name)
		}
	}
	return out, note
}

// bySeed groups runs by their load seed.
func bySeed(rs []*result.Result) map[string][]*result.Result {
	out := map[string][]*result.Result{}
	for _, r := range rs {
		out[seedOf(r)] = append(out[seedOf(r)], r)
	}
	return out
}

// seedLess orders seeds numerically.
func seedLess(a, b string) bool {
	x, errX := strconv.ParseInt(a, 10, 64)
	y, errY := strconv.ParseInt(b, 10, 64)
	if errX != nil || errY != nil {
		return a < b
	}
	return x < y
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
