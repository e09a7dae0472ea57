package sim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/profile"
)

// maxProfileSteps bounds a profile's memory (about 100 bytes a step); steps
// past it are counted, not kept.
const maxProfileSteps = 1 << 20

var errNotProfiling = errors.New("the profiler is not running: POST /start_profile first")

// profiler records scheduler steps between /start_profile and
// /stop_profile. The scheduler checks on with one atomic load per step.
type profiler struct {
	dir string
	on  atomic.Bool

	mu      sync.Mutex
	start   time.Time
	steps   []profile.Step
	idles   []profile.Span
	dropped int
}

func newProfiler(dir string) *profiler { return &profiler{dir: dir} }

// begin starts recording; a second start while recording keeps the first.
func (p *profiler) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on.Load() {
		return
	}
	p.start, p.steps, p.idles, p.dropped = time.Now(), nil, nil, 0
	p.on.Store(true)
}

// step records one engine step that began at start and lasted d.
func (p *profiler) step(start time.Time, d time.Duration, t stepTally, running, waiting int, kv float64) {
	if !p.on.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on.Load() || start.Before(p.start) {
		return
	}
	if len(p.steps) >= maxProfileSteps {
		p.dropped++
		return
	}
	p.steps = append(p.steps, profile.Step{
		Start: start.Sub(p.start), Dur: d,
		PrefillTokens: t.work.prefillTokens, CachedTokens: t.cachedTokens, DecodeTokens: t.work.decodeSeqs,
		PrefillSeqs: t.prefillSeqs, DecodeSeqs: t.work.decodeSeqs,
		Running: running, Waiting: waiting, Preemptions: t.preemptions, KVUsage: kv,
	})
}

// idle records a span in which the scheduler had nothing to run.
func (p *profiler) idle(from, to time.Time) {
	if !p.on.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on.Load() {
		return
	}
	if from.Before(p.start) {
		from = p.start
	}
	if to.After(from) {
		p.idles = append(p.idles, profile.Span{Start: from.Sub(p.start), Dur: to.Sub(from)})
	}
}

// end stops recording and returns the trace as Chrome JSON, written to the
// profile directory when there is one (path is then its file name).
func (p *profiler) end(cfg Config) (body []byte, path string, err error) {
	p.mu.Lock()
	if !p.on.Load() {
		p.mu.Unlock()
		return nil, "", errNotProfiling
	}
	p.on.Store(false)
	t := &profile.Trace{
		Engine: "perfgate-sim", Model: cfg.Model, Start: p.start,
		Config: profileConfig(cfg, p.dropped), Steps: p.steps, Idle: p.idles,
	}
	p.steps, p.idles = nil, nil
	p.mu.Unlock()

	var buf bytes.Buffer
	if err := profile.Write(&buf, t); err != nil {
		return nil, "", err
	}
	if p.dir == "" {
		return buf.Bytes(), "", nil
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("create profile dir: %w", err)
	}
	path = filepath.Join(p.dir, "perfgate-sim."+strconv.FormatInt(t.Start.UnixNano(), 10)+".trace.json")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return nil, "", fmt.Errorf("write profile: %w", err)
	}
	return buf.Bytes(), path, nil
}

// profileConfig is the part of the config that explains a trace.
func profileConfig(c Config, dropped int) map[string]any {
	return map[string]any{
		"decode_step": c.DecodeStep.String(), "per_seq_cost": c.PerSeqCost.String(),
		"prefill_per_token": c.PrefillPerToken.String(), "base_ttft": c.BaseTTFT.String(),
		"prefill_step_overhead": c.PrefillStepOverhead.String(), "slowdown": c.Slowdown,
		"max_num_seqs": c.MaxNumSeqs, "max_num_batched_tokens": c.MaxNumBatchedTokens,
		"prefill_eagerness": c.PrefillEagerness, "num_gpu_blocks": c.NumGPUBlocks,
		"block_size": c.BlockSize, "enable_prefix_caching": c.PrefixCaching,
		"dropped_steps": dropped,
	}
}
