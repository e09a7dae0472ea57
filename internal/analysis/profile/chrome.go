package profile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// Format names the trace layout in otherData, so a reader can tell a
// scheduler profile from a kernel trace.
const Format = "perfgate-scheduler-trace/1"

type chromeFile struct {
	TraceEvents     []chromeEvent  `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit,omitempty"`
	OtherData       map[string]any `json:"otherData,omitempty"`
}

type chromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

type stepArgs struct {
	PrefillTokens int     `json:"prefill_tokens"`
	CachedTokens  int     `json:"cached_tokens"`
	DecodeTokens  int     `json:"decode_tokens"`
	PrefillSeqs   int     `json:"prefill_seqs"`
	DecodeSeqs    int     `json:"decode_seqs"`
	Running       int     `json:"running"`
	Waiting       int     `json:"waiting"`
	Preemptions   int     `json:"preemptions"`
	KVUsage       float64 `json:"kv_cache_usage"`
}

const (
	pid          = 1
	schedulerTID = 1
)

func micros(d time.Duration) float64 { return float64(d) / 1e3 }

func fromMicros(us float64) time.Duration { return time.Duration(math.Round(us * 1e3)) }

// Write encodes t as a Chrome trace: one complete event per step (named for
// its kind) and idle span on the scheduler's track, and counter tracks for
// the batch, the queue and KV cache usage.
func Write(w io.Writer, t *Trace) error {
	events := make([]chromeEvent, 0, 2+3*len(t.Steps)+len(t.Idle))
	events = append(events,
		chromeEvent{Name: "process_name", Ph: "M", PID: pid, TID: schedulerTID, Args: map[string]any{"name": t.Engine + " " + t.Model}},
		chromeEvent{Name: "thread_name", Ph: "M", PID: pid, TID: schedulerTID, Args: map[string]any{"name": "scheduler"}},
	)
	for _, s := range t.Steps {
		ts := micros(s.Start)
		events = append(events,
			chromeEvent{Name: s.Kind().String(), Cat: "step", Ph: "X", TS: ts, Dur: micros(s.Dur), PID: pid, TID: schedulerTID, Args: map[string]any{
				"prefill_tokens": s.PrefillTokens, "cached_tokens": s.CachedTokens, "decode_tokens": s.DecodeTokens,
				"prefill_seqs": s.PrefillSeqs, "decode_seqs": s.DecodeSeqs, "running": s.Running, "waiting": s.Waiting,
				"preemptions": s.Preemptions, "kv_cache_usage": s.KVUsage,
			}},
			chromeEvent{Name: "batch", Ph: "C", TS: ts, PID: pid, Args: map[string]any{"running": s.Running, "waiting": s.Waiting}},
			chromeEvent{Name: "kv_cache_usage", Ph: "C", TS: ts, PID: pid, Args: map[string]any{"usage": s.KVUsage}},
		)
	}
	for _, s := range t.Idle {
		events = append(events, chromeEvent{Name: "idle", Cat: "idle", Ph: "X", TS: micros(s.Start), Dur: micros(s.Dur), PID: pid, TID: schedulerTID})
	}
	f := chromeFile{
		TraceEvents:     events,
		DisplayTimeUnit: "ms",
		OtherData: map[string]any{
			"format": Format, "engine": t.Engine, "model": t.Model,
			"start": t.Start.Format(time.RFC3339Nano), "config": t.Config,
		},
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := json.NewEncoder(bw).Encode(f); err != nil {
		return fmt.Errorf("encode chrome trace: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write chrome trace: %w", err)
	}
	return nil
}

// ReadFile parses the trace at path.
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open profile: %w", err)
	}
	defer f.Close()
	t, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse reads a Chrome trace (a JSON object with traceEvents, or a bare
// event array; gzipped or not) and returns its scheduler steps and idle
// spans in time order.
func Parse(r io.Reader) (*Trace, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("read gzipped trace: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	data, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	data = bytes.TrimSpace(data)
	var f chromeFile
	if len(data) > 0 && data[0] == '[' {
		err = json.Unmarshal(data, &f.TraceEvents)
	} else {
		err = json.Unmarshal(data, &f)
	}
	if err != nil {
		return nil, fmt.Errorf("decode chrome trace: %w", err)
	}
	t := &Trace{}
	if od := f.OtherData; od != nil {
		t.Engine, _ = od["engine"].(string)
		t.Model, _ = od["model"].(string)
		if s, ok := od["start"].(string); ok {
			if at, err := time.Parse(time.RFC3339Nano, s); err == nil {
				t.Start = at
			}
		}
		t.Config, _ = od["config"].(map[string]any)
	}
	for i, ev := range f.TraceEvents {
		if ev.Ph != "X" {
			continue
		}
		span := Span{Start: fromMicros(ev.TS), Dur: fromMicros(ev.Dur)}
		switch ev.Cat {
		case "step":
			var a stepArgs
			if err := remarshal(ev.Args, &a); err != nil {
				return nil, fmt.Errorf("event %d (%s at %.3f µs): args: %w", i, ev.Name, ev.TS, err)
			}
			t.Steps = append(t.Steps, Step{
				Start: span.Start, Dur: span.Dur,
				PrefillTokens: a.PrefillTokens, CachedTokens: a.CachedTokens, DecodeTokens: a.DecodeTokens,
				PrefillSeqs: a.PrefillSeqs, DecodeSeqs: a.DecodeSeqs, Running: a.Running, Waiting: a.Waiting,
				Preemptions: a.Preemptions, KVUsage: a.KVUsage,
			})
		case "idle":
			t.Idle = append(t.Idle, span)
		}
	}
	if len(t.Steps) == 0 {
		return nil, errors.New(`no scheduler steps in the trace (complete events with "cat": "step"): is it a profile from perfgate sim's /stop_profile?`)
	}
	return t, nil
}

func remarshal(in map[string]any, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
