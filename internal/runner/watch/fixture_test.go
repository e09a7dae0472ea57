package watch

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/soak"
)

var update = flag.Bool("update", false, "write the soak package's fixtures (testdata/<name>.json) from this run")

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("sim", flag.ContinueOnError) }

func writeFixture(t *testing.T, name string, samples []soak.Sample) {
	t.Helper()
	b, err := json.MarshalIndent(samples, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "soak", "testdata", name+".json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
