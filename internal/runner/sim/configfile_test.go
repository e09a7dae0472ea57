package sim

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const sampleConfig = "../../../testdata/sim/sim.yaml"

func TestSampleConfigIsTheDefaults(t *testing.T) {
	cfg, err := LoadConfigFile(sampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, DefaultConfig()) {
		t.Errorf("the sample differs from DefaultConfig:\n%+v\n%+v", cfg, DefaultConfig())
	}
	data, err := os.ReadFile(sampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range KnobKeys() {
		if !strings.Contains(string(data), "\n"+k+":") {
			t.Errorf("the sample does not document %s", k)
		}
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig("sim.yaml", []byte("decode_step: 12ms\nprefill_eagerness: 0.25\nenable_prefix_caching: false\nseed: 7\nmodel: org/m\n"), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.DecodeStep, want.PrefillEagerness, want.PrefixCaching, want.Seed, want.Model = 12*time.Millisecond, 0.25, false, 7, "org/m"
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v", cfg)
	}
	for _, empty := range []string{"", "# only a comment\n", "~\n"} {
		if got, err := ParseConfig("e.yaml", []byte(empty), DefaultConfig()); err != nil || !reflect.DeepEqual(got, DefaultConfig()) {
			t.Errorf("%q: %v", empty, err)
		}
	}
}

func TestParseConfigErrorsNameTheLine(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"unknown key", "decode_step: 8ms\ndecode_stepp: 9ms\n", []string{`sim.yaml:2:1: unknown key "decode_stepp" (did you mean "decode_step"?)`}},
		{"two errors", "foo: 1\nslowdown: fast\n", []string{`sim.yaml:1:1: unknown key "foo"`, `sim.yaml:2:11: slowdown: want a number, got "fast"`}},
		{"duration without unit", "\n\ndecode_step: 8\n", []string{"sim.yaml:3:14: decode_step: 8 has no unit"}},
		{"bad duration", "base_ttft: soon\n", []string{`base_ttft: "soon" is not a duration`}},
		{"bool", "enable_prefix_caching: yes\n", []string{"want true or false"}},
		{"int", "max_num_seqs: 1.5\n", []string{"want an integer"}},
		{"list", "seed: [1, 2]\n", []string{"sim.yaml:1:7: seed: want a single value, got a list"}},
		{"null", "jitter:\n", []string{"jitter: needs a value"}},
		{"not a mapping", "- decode_step: 8ms\n", []string{"sim.yaml:1:1: a sim config is a mapping"}},
		{"syntax", "decode_step: [8ms\n", []string{"sim.yaml: yaml:"}},
		{"duplicate", "seed: 1\nseed: 2\n", []string{`sim.yaml:2:1: "seed" is already set on line 1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("sim.yaml", []byte(tt.in), DefaultConfig())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadConfigFileValidates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.yaml")
	if err := os.WriteFile(path, []byte("prefill_eagerness: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfigFile(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "prefill eagerness") {
		t.Errorf("error %v", err)
	}
	if _, err := LoadConfigFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestFlagsOverrideTheFile(t *testing.T) {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	overlay := BindFlags(fs)
	if err := fs.Parse([]string{"--decode-step", "3ms", "--card-cv", "0", "--enable-prefix-caching=false"}); err != nil {
		t.Fatal(err)
	}
	file, err := ParseConfig("sim.yaml", []byte("decode_step: 12ms\nmax_num_seqs: 8\ncard_cv: 0.1\n"), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := overlay(file)
	if got.DecodeStep != 3*time.Millisecond || got.Noise.CardCV != 0 || got.PrefixCaching {
		t.Errorf("flags did not win: %+v", got)
	}
	if got.MaxNumSeqs != 8 {
		t.Errorf("an unset flag reset the file's max_num_seqs to %d", got.MaxNumSeqs)
	}
	// Every knob has a flag.
	for _, k := range knobs {
		if fs.Lookup(k.name) == nil {
			t.Errorf("no flag --%s", k.name)
		}
	}
}
