package result

import (
	"encoding/json"
	"testing"
)

func TestRoundTripKeepsMetricsAndUnknownKeys(t *testing.T) {
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
	for _, in := range []string{`{}`, `{"foo":1}`, `[1,2]`, `not json`} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%s) = nil error, want one", in)
		}
	}
}

func TestParseRate(t *testing.T) {
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
