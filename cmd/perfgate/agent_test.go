package main

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

// TestEngineLimitFlags: the agent's default engine flags are the zero
// Policy, which the sandbox fits to the host (TestDefaultPolicyStarts
// starts an engine with it on a host whose open-file hard limit is below
// 65536); set flags pass through; nonsense is refused naming the flag.
func TestEngineLimitFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want sandbox.Policy
		err  string
	}{
		{nil, sandbox.Policy{}, ""},
		{[]string{"--engine-nofile", "4096", "--engine-nproc", "100", "--engine-cpus", "1.5", "--engine-memory", "2g", "--engine-cpuset", "GPU-a=0-3"},
			sandbox.Policy{NoFile: 4096, NProc: 100, CPUs: "1.5", Memory: "2g", CPUSets: map[string]string{"GPU-a": "0-3"}}, ""},
		{[]string{"--engine-nofile", "-1"}, sandbox.Policy{}, "--engine-nofile -1"},
		{[]string{"--engine-memory", "lots"}, sandbox.Policy{}, "--engine-memory"},
		{[]string{"--engine-cpuset", "GPU-a"}, sandbox.Policy{}, "--engine-cpuset"},
	} {
		env := &cliEnv{stdout: io.Discard, stderr: io.Discard, log: zerolog.Nop()}
		fs := env.flags("agent", "")
		limits := engineLimitFlags(fs)
		if _, ok := fs.parse(tc.args); !ok {
			t.Fatalf("%v: flags refused", tc.args)
		}
		got, err := limits()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %+v (%v), want %+v", tc.args, got, err, tc.want)
		}
	}
}
