package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const mooncakeFixture = "../../../testdata/traces/mooncake_small.jsonl"

// The trace's requests reach the server at their timestamps (scaled),
// counted from the first: never early (a timer never fires early, and the
// schedule starts after the test's start), and late by no more than the
// client's own measured schedule lag plus a bound for the loopback and the
// fake's handler. The lag term keeps a loaded machine from failing the
// test; the self-check reports the same lag, so a client that fell behind
// is still caught there. The schedule is the client's own clock, not the
// answers.
func TestTraceReplayTiming(t *testing.T) {
	rows, err := readTrace(mooncakeFixture)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeVLLM{usage: true}
	url := f.start(t)
	const scale = 0.25
	start := time.Now()
	r, err := Run(context.Background(), Options{Target: url, Dataset: DatasetMooncake, DatasetPath: mooncakeFixture,
		TraceTimeScale: scale, OutputLen: 2, RunID: "tr"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != len(rows) || r.Perfgate.Load.Dataset != "mooncake" || r.Perfgate.Load.TraceTimeScale != scale || r.Perfgate.Client == nil {
		t.Fatalf("completed %d of %d; load %+v; client %+v; errors %v", r.Completed, len(rows), r.Perfgate.Load, r.Perfgate.Client, r.Perfgate.ErrorCounts)
	}
	lag := time.Duration(r.Perfgate.Client.ScheduleLagMaxMS * float64(time.Millisecond))
	first := f.arrivals["tr-0"]
	t0 := *rows[0].Timestamp
	const bound = 100 * time.Millisecond
	var worst time.Duration
	for i, row := range rows {
		at := f.arrivals["tr-"+strconv.Itoa(i)]
		want := time.Duration((*row.Timestamp - t0) * scale * float64(time.Millisecond))
		if early := at.Sub(start); early < want {
			t.Errorf("request %d arrived +%v after the start, before its timestamp's +%v", i, early, want)
		}
		late := at.Sub(first) - want
		worst = max(worst, late)
		if late > bound+lag {
			t.Errorf("request %d arrived at +%v, its timestamp says +%v (bound %v + the client's lag %v)", i, at.Sub(first), want, bound, lag)
		}
	}
	t.Logf("worst send error %v over %d requests (client's max schedule lag %v)", worst, len(rows), lag)
}

// Requests that share a prefix of hash ids share that many blocks of
// prompt text, word for word, and part where the ids part: a server's
// prefix cache sees the trace's reuse.
func TestTracePrefixBlocks(t *testing.T) {
	o := Options{Target: "http://x", Dataset: DatasetMooncake, DatasetPath: mooncakeFixture, Seed: 1}
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	dmeasured, err := loadSamples(context.Background(), &o, nil, promptTokens{})
	measured := dmeasured.measured
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := readTrace(mooncakeFixture)
	const block = 512
	pairs := 0
	for i := range rows {
		wi := strings.Fields(measured[i].prompt)
		if len(wi) != *rows[i].InputLength {
			t.Fatalf("row %d: %d words, want %d", i, len(wi), *rows[i].InputLength)
		}
		for j := i + 1; j < len(rows); j++ {
			wj := strings.Fields(measured[j].prompt)
			shared := 0
			for shared < len(rows[i].HashIDs) && shared < len(rows[j].HashIDs) && rows[i].HashIDs[shared] == rows[j].HashIDs[shared] {
				shared++
			}
			n := min(shared*block, len(wi), len(wj))
			if strings.Join(wi[:n], " ") != strings.Join(wj[:n], " ") {
				t.Errorf("rows %d and %d share %d hash ids but not their first %d words", i, j, shared, n)
			}
			if shared > 0 {
				pairs++
			}
			// Past the shared blocks the text differs (both have a next block).
			if shared < len(rows[i].HashIDs) && shared < len(rows[j].HashIDs) && len(wi) >= (shared+1)*block && len(wj) >= (shared+1)*block &&
				strings.Join(wi[shared*block:(shared+1)*block], " ") == strings.Join(wj[shared*block:(shared+1)*block], " ") {
				t.Errorf("rows %d and %d: different hash ids at block %d, same text", i, j, shared)
			}
		}
	}
	if pairs < 10 {
		t.Errorf("only %d pairs of rows share a prefix: the fixture should exercise the prefix cache", pairs)
	}
	// A timestamp is part of the work: the dataset hash changes with the time scale.
	o2 := o
	o2.TraceTimeScale = 0.5
	dm2, err := loadSamples(context.Background(), &o2, nil, promptTokens{})
	m2 := dm2.measured
	if err != nil || datasetHash(m2) == datasetHash(measured) || m2[5].offset != measured[5].offset/2 {
		t.Errorf("time scale 0.5: %v; offsets %v vs %v", err, m2[5].offset, measured[5].offset)
	}
}

// With the server's tokenizer the prompts are exact in model tokens and
// shared blocks stay shared: only a prompt's tail is adjusted.
func TestTraceWithServerTokenizer(t *testing.T) {
	f := &fakeVLLM{tokenize: true, usage: true}
	url := f.start(t)
	r, err := Run(context.Background(), Options{Target: url, Dataset: DatasetMooncake, DatasetPath: mooncakeFixture,
		NumPrompts: 6, TraceTimeScale: 0.01, OutputLen: 2, RunID: "tk"})
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := readTrace(mooncakeFixture)
	for i := range 6 {
		if n := fakeCount(f.byID["tk-"+strconv.Itoa(i)]); n != *rows[i].InputLength || r.InputLens[i] != n {
			t.Errorf("request %d: %d model tokens (recorded %d), trace says %d", i, n, r.InputLens[i], *rows[i].InputLength)
		}
	}
	// Rows 0 and 2 share hash ids [0 1]: 1024 tokens of the same text.
	a, b := strings.Fields(f.byID["tk-0"]), strings.Fields(f.byID["tk-2"])
	if strings.Join(a[:1000], " ") != strings.Join(b[:1000], " ") {
		t.Error("rows 0 and 2 share two blocks but their prompts differ")
	}
}

func TestTraceRows(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "t"+strconv.Itoa(len(body))+".jsonl")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ body, want string }{
		{`{"timestamp": 1, "input_length": 0, "output_length": 3}`, "line 1: no positive \"input_length\""},
		{"{\"timestamp\": 1, \"input_length\": 3, \"output_length\": 3}\n{\"input_length\": 3, \"output_length\": 3}", "line 2: no non-negative \"timestamp\""},
		{`{"timestamp": 1, "input_length": 3}`, "no positive \"output_length\""},
		{`not json`, "line 1"},
		{"\n\n", "no rows"},
	} {
		if _, err := readTrace(write(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("readTrace(%q) error = %v, want %q", tc.body, err, tc.want)
		}
	}
	// Bailian timestamps are seconds; rows are sent in time order.
	p := write("{\"timestamp\": 2.5, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": [7]}\n{\"timestamp\": 1.0, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": [7]}\n")
	o := Options{Target: "http://x", Dataset: DatasetBailian, DatasetPath: p}
	if err := o.normalize(); err != nil || o.TraceBlockSize != 16 {
		t.Fatalf("normalize: %v, block size %d", err, o.TraceBlockSize)
	}
	dm, err := loadSamples(context.Background(), &o, nil, promptTokens{})
	m := dm.measured
	if err != nil || len(m) != 2 || m[0].promptLen != 3 || m[1].offset != 1500*time.Millisecond ||
		!strings.HasPrefix(m[1].prompt, m[0].prompt) {
		t.Fatalf("samples %+v, %v", m, err)
	}
	// A rate cannot be set on a trace, and the trace must be long enough.
	bad := Options{Target: "http://x", Dataset: DatasetMooncake, DatasetPath: p, RequestRate: 5}
	var ue *UsageError
	if _, err := Run(context.Background(), bad); !errors.As(err, &ue) || ue.Flag != "request-rate" {
		t.Errorf("trace with a rate: %v", err)
	}
	o = Options{Target: "http://x", Dataset: DatasetMooncake, DatasetPath: p, NumPrompts: 3}
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSamples(context.Background(), &o, nil, promptTokens{}); !errors.As(err, &ue) || ue.Flag != "num-prompts" {
		t.Errorf("3 prompts from a 2-row trace: %v", err)
	}
}
