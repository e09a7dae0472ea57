package result

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTripKeepsMetricsAndUnknownKeys(t *testing.T) {
	t.Parallel()
	in := []byte(`{"completed":3,"failed":0,"duration":1.5,"request_rate":"inf","max_concurrency":null,
		"mean_ttft_ms":12.5,"p99.9_ttft_ms":40,"p99_tpot_ms":7,"gpu":"H100","custom_label":{"a":1},
		"input_lens":[1,2,3],"output_lens":[4,5,6],"ttfts":[0.01,0.012,0.015],"itls":[[],[],[]],"errors":["","",""],
		"request_goodput":null,"total_input_tokens":6,"total_output_tokens":15,
		"request_throughput":2,"output_throughput":10,"total_token_throughput":14}`)
	r, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	if !r.RequestRate.IsInf() {
		t.Errorf("request_rate = %v, want inf", r.RequestRate)
	}
	for key, want := range map[string]float64{"mean_ttft_ms": 12.5, "p99.9_ttft_ms": 40, "p99_tpot_ms": 7} {
		if got, ok := r.Metric(key); !ok || got != want {
			t.Errorf("Metric(%q) = %v, %v; want %v", key, got, ok, want)
		}
	}
	if _, ok := r.Extra["gpu"]; !ok {
		t.Errorf("unknown key gpu not kept in Extra: %v", r.Extra)
	}
	if _, ok := r.Extra["mean_ttft_ms"]; ok {
		t.Errorf("metric key leaked into Extra")
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mean_ttft_ms", "p99.9_ttft_ms", "gpu", "custom_label", "request_rate", "ttfts"} {
		if _, ok := back[k]; !ok {
			t.Errorf("key %q lost in round trip: %s", k, out)
		}
	}
	if back["request_rate"] != "inf" {
		t.Errorf("request_rate written as %v, want \"inf\"", back["request_rate"])
	}
}

func TestParseRejectsNonResult(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{}`, `{"foo":1}`, `[1,2]`, `not json`} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%s) = nil error, want one", in)
		}
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Rate
		wantErr bool
	}{
		{"inf", Inf, false},
		{"INF", Inf, false},
		{"2.5", 2.5, false},
		{"0", 0, true},
		{"-1", 0, true},
		{"fast", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Errorf("ParseRate(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// vLLM's --append-result writes a newline before each appended object and
// none after the last; each object is one run.
func TestParseAllAppendedFile(t *testing.T) {
	t.Parallel()
	rs, err := LoadAll("../../../testdata/vllm/append-result-two-runs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Date != "20250611-142233" || rs[1].Date != "20250611-143010" || rs[1].Metrics["mean_ttft_ms"] != 210 {
		t.Fatalf("got %d results: %+v", len(rs), rs)
	}
	if rs[0].EndpointType != "openai-chat" || rs[0].Label != "" {
		t.Errorf("endpoint_type %q label %q", rs[0].EndpointType, rs[0].Label)
	}
	if _, err := LoadFile("../../../testdata/vllm/append-result-two-runs.jsonl"); err == nil || !strings.Contains(err.Error(), "holds 2 results") {
		t.Errorf("LoadFile of an appended file: %v", err)
	}
}

func TestParseAllErrorsNameTheObject(t *testing.T) {
	t.Parallel()
	good := `{"completed":1,"mean_ttft_ms":1}`
	tests := []struct{ in, want string }{
		{good + "\n" + `{"foo":1}`, "result 2 (line 2): not a benchmark result"},
		{good + "\n\n" + `{"completed":`, "result 2 (after line 3)"},
		{"  \n", "no result"},
		{`{"foo":1}`, "not a benchmark result"},
	}
	for _, tt := range tests {
		_, err := ParseAll([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseAll(%q) error = %v, want %q", tt.in, err, tt.want)
		}
	}
}

// perfgate can append after vLLM (whose last line has no newline) and
// after itself, and the file reads back as every run in order.
func TestAppendFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(path, []byte(`{"completed":1,"mean_ttft_ms":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 3; i++ {
		r := &Result{Completed: i, Metrics: map[string]float64{"mean_ttft_ms": float64(i)}}
		if err := r.AppendFile(path); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 3 || strings.Contains(string(data), "\n\n") {
		t.Errorf("file has %d newlines or a blank line:\n%s", n, data)
	}
	rs, err := ParseAll(data)
	if err != nil || len(rs) != 3 || rs[2].Completed != 3 {
		t.Fatalf("read back %d results: %v", len(rs), err)
	}
}
