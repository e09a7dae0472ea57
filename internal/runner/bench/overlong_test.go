package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/runner/sim"
)

// conversationFixture is 40 rows in the published format of Mooncake's
// conversation trace (timestamps in ms, 512-token hash-id blocks,
// multi-turn sessions whose later turns reuse the earlier turns' blocks);
// 6 rows (lines 5, 12, 13, 20, 31, 35) are past a 32,768-token context,
// as about a tenth of the real trace's first rows are.
const conversationFixture = "testdata/mooncake_conversation_small.jsonl"

// A Mooncake trace with rows longer than the model's context is replayed
// whole: by default the rows that cannot fit are left out and counted,
// truncate cuts their prompts to fit, and fail refuses the run before any
// request or prompt is made, naming the rows and the flag to change.
func TestTraceOverlongRows(t *testing.T) {
	t.Parallel()
	rows, err := readTrace(conversationFixture)
	if err != nil {
		t.Fatal(err)
	}
	const ctxLen = 32768
	var over []int // indexes of the rows that do not fit
	for i, r := range rows {
		if *r.InputLength+*r.OutputLength > ctxLen {
			over = append(over, i)
		}
	}
	if len(rows) != 40 || len(over) != 6 {
		t.Fatalf("fixture: %d rows, %d overlong; want 40 and 6", len(rows), len(over))
	}
	for _, tc := range []struct {
		policy  string
		sent    int    // measured requests the engine served
		warning string // in the result's warnings
		err     string // the run's error, "" when it runs
	}{
		{"", 34, "6 of 40 trace rows do not fit the model's max_model_len 32768 (prompt + output tokens; the first at line 5): left out (--trace-overlong skip); the replay sent the other 34", ""},
		{OverlongTruncate, 40, "6 of 40 trace rows do not fit the model's max_model_len 32768 (the first at line 5): their prompts were cut to fit", ""},
		{OverlongFail, 0, "", "--trace-overlong: 6 of 40 rows of " + conversationFixture + " do not fit the model's max_model_len 32768 (prompt + output tokens; the first at line 5): pass --trace-overlong skip (the default) to leave them out or truncate to cut their prompts, or serve the model with a longer context"},
	} {
		name := tc.policy
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var trace lockedBuffer
			cfg := sim.DefaultConfig().Quiet()
			cfg.BaseTTFT, cfg.DecodeStep, cfg.PerSeqCost, cfg.PrefillPerToken, cfg.PrefillStepOverhead = 0, 0, 0, 0, 0
			cfg.NumGPUBlocks = 1 << 17 // room for every row in flight at once
			cfg.Trace = &trace
			url, stop := startSim(t, cfg)
			r, err := Run(context.Background(), Options{Target: url, Dataset: DatasetMooncake, DatasetPath: conversationFixture,
				TraceTimeScale: 0.01, TraceOverlong: tc.policy, RunID: "mc"})
			stop()
			served := readSimTrace(t, trace.buf.Bytes())
			if tc.err != "" {
				var ue *UsageError
				if !errors.As(err, &ue) || err.Error() != tc.err {
					t.Fatalf("Run error = %v\nwant %s", err, tc.err)
				}
				if len(served) != 0 {
					t.Errorf("the engine served %d requests before the refusal, want none", len(served))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Completed != tc.sent || r.Failed != 0 || r.NumPrompts != tc.sent {
				t.Fatalf("completed %d failed %d of %d, want %d; errors %v", r.Completed, r.Failed, r.NumPrompts, tc.sent, r.Perfgate.ErrorCounts)
			}
			if !strings.Contains(strings.Join(r.Perfgate.Warnings, "\n"), tc.warning) {
				t.Errorf("warnings %q\nwant one with %q", r.Perfgate.Warnings, tc.warning)
			}
			// Every request the engine served is a row of the trace, with
			// the row's prompt length (or, cut, the context less its output).
			want := make([]int, 0, len(rows))
			for i, row := range rows {
				in := *row.InputLength
				isOver := len(over) > 0 && contains(over, i)
				switch {
				case isOver && tc.policy == "":
					continue
				case isOver:
					in = ctxLen - *row.OutputLength
				}
				want = append(want, in)
			}
			for i, in := range want {
				rec, ok := served["mc-"+strconv.Itoa(i)]
				if !ok || rec.Status != 200 || rec.PromptTokens != in {
					t.Errorf("request %d: served %v %+v, want a %d-token prompt", i, ok, rec, in)
				}
			}
			if len(served) != len(want)+1 { // and the first request
				t.Errorf("the engine served %d requests, want %d and the first", len(served), len(want))
			}
		})
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// fitRows alone: what each policy keeps, cuts and counts, and a trace of
// which no row fits.
func TestFitRows(t *testing.T) {
	t.Parallel()
	row := func(line, in, out int) traceRow {
		ts := float64(line)
		return traceRow{Timestamp: &ts, InputLength: &in, OutputLength: &out, line: line}
	}
	rows := []traceRow{row(1, 90, 10), row(2, 95, 10), row(3, 50, 200), row(4, 10, 5)}
	for _, tc := range []struct {
		policy    string
		outputLen int
		kept      string // in+out of each kept row
		skipped   int
		truncated int
		err       string
	}{
		{OverlongSkip, 0, "90+10 10+5", 2, 0, ""},
		{OverlongTruncate, 0, "90+10 90+10 1+99 10+5", 0, 2, ""},
		{OverlongSkip, 5, "90+5 95+5 50+5 10+5", 0, 0, ""},
		{OverlongFail, 0, "", 2, 0, "--trace-overlong: 2 of 4 rows of t.jsonl do not fit"},
		{OverlongSkip, 100, "", 4, 0, "--trace-overlong: none of the 4 rows of t.jsonl fits"},
	} {
		kept, v, err := fitRows(rows, 100, tc.outputLen, tc.policy, "t.jsonl")
		var got []string
		for _, r := range kept {
			got = append(got, fmt.Sprintf("%d+%d", *r.InputLength, *r.OutputLength))
		}
		name := fmt.Sprintf("%s/output-len=%d", tc.policy, tc.outputLen)
		if strings.Join(got, " ") != tc.kept || v.skipped != tc.skipped || v.truncated != tc.truncated {
			t.Errorf("%s: kept %q skipped %d truncated %d, want %q, %d, %d", name, got, v.skipped, v.truncated, tc.kept, tc.skipped, tc.truncated)
		}
		if (err == nil) != (tc.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("%s: error %v, want %q", name, err, tc.err)
		}
	}
	// The rows themselves are untouched: a replay can run twice.
	if *rows[2].InputLength != 50 || *rows[2].OutputLength != 200 {
		t.Errorf("fitRows changed its input: %d+%d", *rows[2].InputLength, *rows[2].OutputLength)
	}
}
